package ingest

import (
	"encoding/binary"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
)

// DropTally says how many events of one link or site, in one UTC hour, an
// edge dropped before writing them: the queue was full, unshipped data
// was at its cap, a write failed, or the node was closing. Tallies are
// written into segments as records of their own, so the aggregator stores
// each exactly once with its segment, and a stats answer can say how many
// events its range is missing instead of showing a silent undercount.
// Drops on purpose (invalid, unknown site, Origin, rate limits, DNT) are
// not undercounts and are not tallied; the metrics count them.
type DropTally struct {
	Scope Scope
	// Name is the link code or site id; "" when the dropped events could
	// not be attributed (a failed write loses records already encoded, and
	// a full table folds new names into one entry per hour).
	Name  string
	Hour  int64  // UTC hours since the Unix epoch
	Count uint64 // at least 1
}

// Scope says what a tally's Name is.
type Scope uint8

// Tally scopes.
const (
	ScopeUnknown Scope = 0 // Name is ""
	ScopeLink    Scope = 1
	ScopeSite    Scope = 2
)

// A tally record's payload starts with tallyVersion, a byte no event
// version uses, so one record type can never be read as the other:
//
//	tallyVersion | scope byte | hour varint | count uvarint | name (uvarint length + bytes)
const (
	tallyVersion  = 0xD1
	maxTallyCount = 1 << 40
)

// isTally reports whether a record payload is a tally.
func isTally(payload []byte) bool { return len(payload) > 0 && payload[0] == tallyVersion }

// AppendDropTally appends the record payload of t to dst.
func AppendDropTally(dst []byte, t *DropTally) []byte {
	dst = append(dst, tallyVersion, byte(t.Scope))
	dst = binary.AppendVarint(dst, t.Hour)
	dst = binary.AppendUvarint(dst, t.Count)
	return appendString(dst, t.Name)
}

// DecodeDropTally decodes a tally record payload, checking every field: a
// malformed one returns an error wrapping ErrCorruptEvent.
func DecodeDropTally(b []byte, t *DropTally) error { return decodeDropTally(b, t, false) }

// decodeDropTally checks every field; with validateOnly it allocates
// nothing and leaves Name empty.
func decodeDropTally(b []byte, t *DropTally, validateOnly bool) error {
	if len(b) < 2 || b[0] != tallyVersion {
		return corruptEvent("not a drop tally")
	}
	*t = DropTally{Scope: Scope(b[1])}
	d := decoder{b: b, off: 2, validateOnly: validateOnly}
	if !validateOnly {
		d.s = string(b)
	}
	t.Hour = d.varint()
	t.Count = d.uvarint()
	nameAt := d.off
	t.Name = d.string(maxTallyName)
	named := d.off-nameAt > 1 // the length prefix of a name this short is one byte
	switch {
	case d.err != "":
	case t.Scope > ScopeSite:
		d.fail("unknown tally scope")
	case (t.Scope == ScopeUnknown) == named:
		d.fail("tally name does not fit its scope")
	case t.Count == 0 || t.Count > maxTallyCount:
		d.fail("tally count out of range")
	case t.Hour < 0 || t.Hour > 1<<32:
		d.fail("tally hour out of range")
	case d.off != len(b):
		d.fail("trailing bytes")
	}
	if d.err != "" {
		return corruptEvent("%s", d.err)
	}
	return nil
}

// maxTallyName is the longest name a tally holds: a code or a site id.
const maxTallyName = max(MaxCodeLen, MaxSiteIDLen)

// dropTallies collects drops until the writer puts them in the open
// segment. Serving goroutines add to it when the queue is full, so it is
// sharded by name, and an add is one map update under an uncontended
// lock; it allocates only for a name and hour it has not seen since the
// last drain. It is bounded: past tallyShardMax names in a shard, drops
// go to the shard's unattributed entry of their hour.
type dropTallies struct {
	seed   maphash.Seed
	dirty  atomic.Bool
	shards [tallyShards]tallyShard
}

const (
	tallyShards   = 16
	tallyShardMax = 512
)

type tallyShard struct {
	mu sync.Mutex
	m  map[tallyKey]tallyEntry
	_  [48]byte // keep shards on separate cache lines
}

type tallyKey struct {
	hash  uint64 // of the name; 0 for the unattributed entry
	hour  int64
	scope Scope
}

type tallyEntry struct {
	name string
	n    uint64
}

func newDropTallies() *dropTallies {
	t := &dropTallies{seed: maphash.MakeSeed()}
	for i := range t.shards {
		t.shards[i].m = make(map[tallyKey]tallyEntry)
	}
	return t
}

// add counts n dropped events of name (a link code or site id, by scope)
// at Unix ms time ms. name may be a view of a reused buffer: it is copied
// when it is new.
func (t *dropTallies) add(scope Scope, name string, ms int64, n uint64) {
	if n == 0 {
		return
	}
	if len(name) == 0 {
		scope = ScopeUnknown
	}
	k := tallyKey{hour: max(ms, 0) / msPerHourTally, scope: scope}
	if scope != ScopeUnknown {
		k.hash = maphash.String(t.seed, name) | 1
	}
	sh := &t.shards[k.hash%tallyShards]
	sh.mu.Lock()
	e, ok := sh.m[k]
	if !ok && k.hash != 0 && len(sh.m) >= tallyShardMax {
		k.hash, k.scope = 0, ScopeUnknown
		e, ok = sh.m[k]
	}
	if !ok && k.hash != 0 {
		e.name = strings.Clone(name)
	}
	e.n += n
	sh.m[k] = e
	sh.mu.Unlock()
	if !t.dirty.Load() {
		t.dirty.Store(true)
	}
}

const msPerHourTally = 3_600_000

// drain hands every tally to put and forgets those it took. One put
// refuses (returns false, the segment could not take it) stays for the
// next drain, and so do the ones after it.
func (t *dropTallies) drain(put func(*DropTally) bool) {
	if !t.dirty.Swap(false) {
		return
	}
	var dt DropTally
	refused := false
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for k, e := range sh.m {
			if refused {
				break
			}
			dt = DropTally{Scope: k.scope, Name: e.name, Hour: k.hour, Count: e.n}
			if !put(&dt) {
				refused = true
				break
			}
			delete(sh.m, k)
		}
		sh.mu.Unlock()
	}
	if refused {
		t.dirty.Store(true)
	}
}

// len is how many tallies wait (a gauge; it takes every shard's lock).
func (t *dropTallies) len() int {
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}
