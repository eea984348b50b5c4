package store

import (
	_ "embed"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cockroachdb/pebble/v2"
)

// The blocklist is replicated state like links: table 'B', key = the
// entry's canonical value (a name, an address or a prefix), value = a
// record with its kind, reason and time. The FSM changes it through
// Batch.UpdateBlocklist; every reader matches against an in-memory
// snapshot (Blocklist) that Commit rebuilds and swaps atomically, so the
// redirect path checks it with one pointer load and no allocation.

// BlockKind says what an entry refuses.
type BlockKind byte

const (
	// BlockKindBlock refuses creates and edits, and stops existing links
	// redirecting.
	BlockKindBlock BlockKind = 1
	// BlockKindShortener refuses creates and edits only: a link to a URL
	// shortener hides its real destination (and may loop back here).
	BlockKindShortener BlockKind = 2
)

func (k BlockKind) String() string {
	switch k {
	case BlockKindBlock:
		return "block"
	case BlockKindShortener:
		return "shortener"
	}
	return fmt.Sprintf("kind(%d)", byte(k))
}

// ParseBlockKind reads "block" or "shortener".
func ParseBlockKind(s string) (BlockKind, bool) {
	switch s {
	case "block":
		return BlockKindBlock, true
	case "shortener":
		return BlockKindShortener, true
	}
	return 0, false
}

// MaxBlockReasonLen bounds an entry's reason.
const MaxBlockReasonLen = 200

// BlockEntry is one replicated blocklist entry.
type BlockEntry struct {
	Value   string // canonical (ParseBlockEntry): a name, an address or a prefix
	Kind    BlockKind
	Reason  string
	AddedAt int64 // Unix ms
	Builtin bool  // on the shipped shortener list, not replicated
}

// BlockChange adds (or replaces) an entry, or removes one by Entry.Value.
type BlockChange struct {
	Remove bool
	Entry  BlockEntry
}

// ParseBlockEntry reads an entry as an operator or a feed writes it and
// returns its canonical value: a host name (a leading "*." or "." is
// dropped: subdomains are always included), an IP address in any form
// ParseHost reads, or a CIDR prefix (masked; an IPv4-mapped IPv6 prefix of
// /96 or longer becomes its IPv4 prefix; a full-length prefix is the
// address itself).
func ParseBlockEntry(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("blocklist entry is empty")
	}
	if addr, bits, ok := strings.Cut(s, "/"); ok {
		return parseBlockPrefix(s, addr, bits)
	}
	if t, ok := strings.CutPrefix(s, "*."); ok {
		s = t
	} else if t, ok := strings.CutPrefix(s, "."); ok {
		s = t
	}
	h, err := ParseHost(s)
	if err != nil {
		return "", fmt.Errorf("blocklist entry %q: %w", s, err)
	}
	return h.String(), nil
}

func parseBlockPrefix(s, addr, bits string) (string, error) {
	addr = strings.TrimSuffix(strings.TrimPrefix(addr, "["), "]")
	p, err := netip.ParsePrefix(addr + "/" + bits)
	if err != nil || p.Addr().Zone() != "" {
		return "", fmt.Errorf("blocklist entry %q is not a valid CIDR prefix", s)
	}
	a := p.Addr()
	if a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	p = p.Masked()
	if p.IsSingleIP() {
		return p.Addr().String(), nil
	}
	return p.String(), nil
}

// CheckBlockEntry refuses an entry the store cannot hold: a value that is
// not canonical, an unknown kind, a reason that is too long, not UTF-8 or
// holds control characters.
func CheckBlockEntry(e *BlockEntry) error {
	if v, err := ParseBlockEntry(e.Value); err != nil || v != e.Value {
		return fmt.Errorf("blocklist entry %q is not in canonical form", e.Value)
	}
	if e.Kind != BlockKindBlock && e.Kind != BlockKindShortener {
		return fmt.Errorf("blocklist entry %q has unknown kind %d", e.Value, e.Kind)
	}
	return CheckBlockReason(e.Reason)
}

// CheckBlockReason refuses a reason that is too long, not UTF-8 or holds
// control characters.
func CheckBlockReason(r string) error {
	if len(r) > MaxBlockReasonLen || !utf8.ValidString(r) {
		return fmt.Errorf("blocklist reason must be at most %d bytes of UTF-8", MaxBlockReasonLen)
	}
	for _, c := range r {
		if unicode.IsControl(c) {
			return errors.New("blocklist reason holds a control character")
		}
	}
	return nil
}

func blockKey(value string) []byte { return append([]byte{tabBlocklist}, value...) }

const blockRecordVersion = 1

// AppendBlockRecord encodes an entry's record (its value is the key).
func AppendBlockRecord(dst []byte, e *BlockEntry) []byte {
	dst = append(dst, blockRecordVersion, byte(e.Kind))
	dst = appendVarint(dst, e.AddedAt)
	return AppendString(dst, e.Reason)
}

// DecodeBlockRecord decodes the record stored under value.
func DecodeBlockRecord(value string, v []byte, e *BlockEntry) error {
	r := NewFieldReader(v)
	if r.Byte() != blockRecordVersion {
		return ErrCorrupt
	}
	*e = BlockEntry{Value: value, Kind: BlockKind(r.Byte()), AddedAt: r.Varint(), Reason: r.String()}
	if !r.Done() || CheckBlockEntry(e) != nil {
		return ErrCorrupt
	}
	return nil
}

// UpdateBlocklist applies changes in order; they reach the in-memory
// snapshot when the batch commits. Removing an absent entry is a no-op.
// It checks every change before writing any, so a refused update leaves
// nothing in the batch.
func (b *Batch) UpdateBlocklist(changes []BlockChange) (added, removed int, err error) {
	for i := range changes {
		c := &changes[i]
		if c.Remove {
			if _, err := ParseBlockEntry(c.Entry.Value); err != nil {
				return 0, 0, fmt.Errorf("cannot update blocklist: %w", err)
			}
			continue
		}
		if err := CheckBlockEntry(&c.Entry); err != nil {
			return 0, 0, fmt.Errorf("cannot update blocklist: %w", err)
		}
	}
	for i := range changes {
		c := &changes[i]
		k := blockKey(c.Entry.Value)
		if c.Remove {
			found, err := get(b.b, k, func([]byte) error { return nil })
			if err != nil {
				return 0, 0, fmt.Errorf("cannot update blocklist: %w", err)
			}
			if !found {
				continue
			}
			if err := b.b.Delete(k, nil); err != nil {
				return 0, 0, fmt.Errorf("cannot update blocklist: %w", storageErr(err))
			}
			removed++
		} else {
			if err := b.set(k, AppendBlockRecord(nil, &c.Entry)); err != nil {
				return 0, 0, fmt.Errorf("cannot update blocklist: %w", err)
			}
			added++
		}
		b.blockChanges = append(b.blockChanges, *c)
	}
	return added, removed, nil
}

// BlockEntries lists entries in value order, starting after after, at most
// limit of them (limit <= 0: all).
func (s *Store) BlockEntries(after string, limit int) ([]BlockEntry, error) {
	lo := []byte{tabBlocklist}
	if after != "" {
		lo = append(blockKey(after), 0)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: []byte{tabBlocklist + 1}})
	if err != nil {
		return nil, fmt.Errorf("cannot list blocklist: %w", storageErr(err))
	}
	var out []BlockEntry
	for valid := it.First(); valid && (limit <= 0 || len(out) < limit); valid = it.Next() {
		var e BlockEntry
		if err := DecodeBlockRecord(string(it.Key()[1:]), it.Value(), &e); err != nil {
			it.Close()
			return nil, fmt.Errorf("cannot list blocklist: entry %q: %w", it.Key()[1:], storageErr(err))
		}
		out = append(out, e)
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("cannot list blocklist: %w", storageErr(err))
	}
	return out, nil
}

// Blocklist returns the current snapshot; never nil once the store is open.
func (s *Store) Blocklist() *Blocklist { return s.blocklist.Load() }

// loadBlocklist rebuilds the snapshot from the table (at open, after a
// restore).
func (s *Store) loadBlocklist() error {
	entries, err := s.BlockEntries("", 0)
	if err != nil {
		return err
	}
	s.publishBlocklist(NewBlocklist(entries, nextBlockGen(s.blockGen.Load())))
	return nil
}

// applyBlockChanges swaps in a snapshot with changes applied to the
// current one. Only the FSM goroutine commits (and Restore, which raft
// never runs beside an apply), so there is one writer.
func (s *Store) applyBlockChanges(changes []BlockChange) {
	s.publishBlocklist(s.blocklist.Load().with(changes, nextBlockGen(s.blockGen.Load())))
}

// publishBlocklist swaps bl in, then its generation: a reader that sees
// the new generation finds the new snapshot.
func (s *Store) publishBlocklist(bl *Blocklist) {
	s.blocklist.Store(bl)
	s.blockGen.Store(bl.gen)
}

// MaxBlocklistGen bounds generations: 1 to 2^31-1, then round again, so
// a reader can pack one with a bit beside it in a uint32.
const MaxBlocklistGen = 1<<31 - 1

func nextBlockGen(g uint32) uint32 {
	if g >= MaxBlocklistGen {
		return 1
	}
	return g + 1
}

// BlocklistGen is the generation of the current snapshot (Blocklist().Gen()
// without loading it): never 0, at most MaxBlocklistGen.
func (s *Store) BlocklistGen() uint32 { return s.blockGen.Load() }

//go:embed shorteners.txt
var shortenersTxt string

// builtinShorteners is the shipped list of URL-shortener domains.
var builtinShorteners = func() []BlockEntry {
	var out []BlockEntry
	for line := range strings.Lines(shortenersTxt) {
		line, _, _ = strings.Cut(line, "#")
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		v, err := ParseBlockEntry(line)
		if err != nil {
			panic("BUG: shorteners.txt: " + err.Error())
		}
		out = append(out, BlockEntry{Value: v, Kind: BlockKindShortener, Reason: "on the built-in list of URL shorteners", Builtin: true})
	}
	return out
}()

// BuiltinShorteners returns the shipped shortener list.
func BuiltinShorteners() []BlockEntry { return slices.Clone(builtinShorteners) }

// Blocklist is an immutable snapshot of the blocklist, built-in
// shorteners included.
type Blocklist struct {
	gen   uint32
	block matchSet
	short matchSet
	n     int // replicated entries
}

// matchSet matches canonical hosts against one kind's entries.
type matchSet struct {
	names    map[string]BlockEntry
	addrs    map[netip.Addr]BlockEntry
	prefixes map[netip.Prefix]BlockEntry
	bits     []int // distinct prefix lengths in prefixes, longest first
}

// NewBlocklist builds a snapshot of entries plus the built-in shorteners.
func NewBlocklist(entries []BlockEntry, gen uint32) *Blocklist {
	bl := &Blocklist{gen: gen, block: newMatchSet(), short: newMatchSet()}
	for _, e := range builtinShorteners {
		bl.short.add(e)
	}
	for _, e := range entries {
		bl.put(e)
	}
	bl.block.sortBits()
	bl.short.sortBits()
	return bl
}

func newMatchSet() matchSet {
	return matchSet{names: map[string]BlockEntry{}, addrs: map[netip.Addr]BlockEntry{}, prefixes: map[netip.Prefix]BlockEntry{}}
}

func (m matchSet) clone() matchSet {
	return matchSet{names: maps.Clone(m.names), addrs: maps.Clone(m.addrs), prefixes: maps.Clone(m.prefixes)}
}

// classify tells a canonical value's form without a failed parse (which
// would allocate its error): a prefix has a '/', an address a ':' or a
// numeric last label, anything else is a name.
func classify(v string) (p netip.Prefix, a netip.Addr) {
	switch {
	case strings.IndexByte(v, '/') >= 0:
		p, _ = netip.ParsePrefix(v)
	case strings.IndexByte(v, ':') >= 0 || EndsInNumber(v):
		a, _ = netip.ParseAddr(v)
	}
	return p, a
}

func (m *matchSet) add(e BlockEntry) {
	switch p, a := classify(e.Value); {
	case p.IsValid():
		m.prefixes[p] = e
	case a.IsValid():
		m.addrs[a] = e
	default:
		m.names[e.Value] = e
	}
}

func (m *matchSet) remove(value string) {
	switch p, a := classify(value); {
	case p.IsValid():
		delete(m.prefixes, p)
	case a.IsValid():
		delete(m.addrs, a)
	default:
		delete(m.names, value)
	}
}

func (m *matchSet) sortBits() {
	m.bits = m.bits[:0]
	for p := range m.prefixes {
		if !slices.Contains(m.bits, p.Bits()) {
			m.bits = append(m.bits, p.Bits())
		}
	}
	slices.Sort(m.bits)
	slices.Reverse(m.bits)
}

// put adds a replicated entry, replacing any entry with its value.
func (bl *Blocklist) put(e BlockEntry) {
	if old, ok := bl.lookupValue(e.Value); !ok || old.Builtin {
		bl.n++
	}
	bl.block.remove(e.Value)
	bl.short.remove(e.Value)
	if e.Kind == BlockKindShortener {
		bl.short.add(e)
	} else {
		bl.block.add(e)
	}
}

// lookupValue finds the entry with exactly this value, in either set.
func (bl *Blocklist) lookupValue(v string) (BlockEntry, bool) {
	p, a := classify(v)
	for _, m := range []*matchSet{&bl.block, &bl.short} {
		var e BlockEntry
		var ok bool
		switch {
		case p.IsValid():
			e, ok = m.prefixes[p]
		case a.IsValid():
			e, ok = m.addrs[a]
		default:
			e, ok = m.names[v]
		}
		if ok {
			return e, true
		}
	}
	return BlockEntry{}, false
}

// with returns a new snapshot: bl with changes applied.
func (bl *Blocklist) with(changes []BlockChange, gen uint32) *Blocklist {
	nb := &Blocklist{gen: gen, block: bl.block.clone(), short: bl.short.clone(), n: bl.n}
	for _, c := range changes {
		if !c.Remove {
			nb.put(c.Entry)
			continue
		}
		if old, ok := nb.lookupValue(c.Entry.Value); ok && !old.Builtin {
			nb.n--
		}
		nb.block.remove(c.Entry.Value)
		nb.short.remove(c.Entry.Value)
		for _, e := range builtinShorteners {
			if e.Value == c.Entry.Value {
				nb.short.add(e) // the shipped list stays
			}
		}
	}
	nb.block.sortBits()
	nb.short.sortBits()
	return nb
}

// Gen identifies the snapshot: every swap gets a new one.
func (bl *Blocklist) Gen() uint32 { return bl.gen }

// Len is the number of replicated entries (the built-in list excluded).
func (bl *Blocklist) Len() int { return bl.n }

// Match finds the entry that refuses a destination host: a block entry
// first, then a shortener; a name matches an entry for it or for any
// domain it belongs to; an address matches an address or a prefix
// holding it.
func (bl *Blocklist) Match(h Host) (BlockEntry, bool) {
	if e, ok := bl.block.match(h); ok {
		return e, true
	}
	return bl.short.match(h)
}

// Blocks reports whether a host is on a block entry (not a shortener):
// the redirect-time check. It does not allocate.
func (bl *Blocklist) Blocks(h Host) bool {
	_, ok := bl.block.match(h)
	return ok
}

// BlocksName is Blocks for a canonical name.
func (bl *Blocklist) BlocksName(name string) bool {
	_, ok := bl.block.name(name)
	return ok
}

// BlocksAddr is Blocks for a canonical address.
func (bl *Blocklist) BlocksAddr(a netip.Addr) bool {
	_, ok := bl.block.addr(a)
	return ok
}

func (m *matchSet) match(h Host) (BlockEntry, bool) {
	if h.IsAddr() {
		return m.addr(h.Addr)
	}
	return m.name(h.Name)
}

func (m *matchSet) name(name string) (BlockEntry, bool) {
	if len(m.names) == 0 {
		return BlockEntry{}, false
	}
	for {
		if e, ok := m.names[name]; ok {
			return e, true
		}
		i := strings.IndexByte(name, '.')
		if i < 0 {
			return BlockEntry{}, false
		}
		name = name[i+1:]
	}
}

func (m *matchSet) addr(a netip.Addr) (BlockEntry, bool) {
	a = CanonicalAddr(a)
	if e, ok := m.addrs[a]; ok {
		return e, true
	}
	for _, bits := range m.bits {
		if bits > a.BitLen() {
			continue
		}
		p, err := a.Prefix(bits)
		if err != nil {
			continue
		}
		if e, ok := m.prefixes[p]; ok {
			return e, true
		}
	}
	return BlockEntry{}, false
}
