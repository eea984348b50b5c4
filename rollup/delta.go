package rollup

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// delta collects, in memory, what one apply (or one rebuilt day) changes:
// counter deltas per (entity, dimension, value, hour) and the visitor
// hashes seen per the same cell. Strings are interned into small ids, so a
// cell is a 16-byte key and adding to it is one map lookup. flush adds the
// hours up into days and months, encodes one rowset per (entity, dimension,
// bucket) and one visitor set per (entity, dimension, value, bucket), and
// writes them as merge operands: nothing stored is read.
type delta struct {
	ents    strTable // kind byte, length byte, entity: the entity part of a key
	vals    strTable // dimension values, and property dimensions' key bytes
	cells   map[cellKey]int32
	counts  []counters
	hashIdx map[cellKey]int32
	hashes  [][]uint64
	allTime map[uint32]*counters // link entity id -> all-time delta
	scratch []byte
}

// cellKey is one value of one dimension of one entity in one hour. dim is
// the dimension byte, or propDimBase plus the vals id of a property
// dimension's key bytes.
type cellKey struct {
	ent, dim, val, hour uint32
}

const propDimBase = 1 << 8

func newDelta() *delta {
	return &delta{
		ents: newStrTable(), vals: newStrTable(),
		cells: make(map[cellKey]int32), hashIdx: make(map[cellKey]int32),
		allTime: make(map[uint32]*counters),
	}
}

// strTable interns strings. Lookups of a []byte key do not allocate.
type strTable struct {
	ids  map[string]uint32
	strs []string
}

func newStrTable() strTable { return strTable{ids: make(map[string]uint32)} }

func (t *strTable) id(s string) uint32 {
	if id, ok := t.ids[s]; ok {
		return id
	}
	id := uint32(len(t.strs))
	t.ids[s] = id
	t.strs = append(t.strs, s)
	return id
}

func (t *strTable) idBytes(b []byte) uint32 {
	if id, ok := t.ids[string(b)]; ok {
		return id
	}
	return t.id(string(b))
}

// ent interns an entity of a kind.
func (d *delta) ent(kind byte, entity string) uint32 {
	d.scratch = append(d.scratch[:0], kind, byte(len(entity)))
	d.scratch = append(d.scratch, entity...)
	return d.ents.idBytes(d.scratch)
}

// propDim interns the dimension of custom property name.
func (d *delta) propDim(name string) uint32 {
	d.scratch = append(d.scratch[:0], dimProp, byte(len(name)))
	d.scratch = append(d.scratch, name...)
	return propDimBase + d.vals.idBytes(d.scratch)
}

func (d *delta) val(v string) uint32 { return d.vals.id(v) }

func (d *delta) cell(k cellKey) *counters {
	i, ok := d.cells[k]
	if !ok {
		i = int32(len(d.counts))
		d.cells[k] = i
		d.counts = append(d.counts, counters{})
	}
	return &d.counts[i]
}

// add moves field f of a cell in the hour of ms by n.
func (d *delta) add(ent, dim, val uint32, ms int64, f int, n int64) {
	if n == 0 {
		return
	}
	d.cell(cellKey{ent, dim, val, hourOf(ms)})[f] += n
}

// addVec adds sign times c to a cell in hour h.
func (d *delta) addVec(ent, dim, val, h uint32, c *counters, sign int64) {
	cur := d.cell(cellKey{ent, dim, val, h})
	for i, x := range c {
		cur[i] += sign * x
	}
}

// addAllTime moves field f of a link's all-time row by n.
func (d *delta) addAllTime(ent uint32, f int, n int64) {
	c := d.allTime[ent]
	if c == nil {
		c = new(counters)
		d.allTime[ent] = c
	}
	c[f] += n
}

// visitor adds a visitor hash to the cell in the hour of ms.
func (d *delta) visitor(ent, dim, val uint32, ms int64, hash uint64) {
	d.visitorAt(ent, dim, val, hourOf(ms), hash)
}

func (d *delta) visitorAt(ent, dim, val, h uint32, hash uint64) {
	k := cellKey{ent, dim, val, h}
	i, ok := d.hashIdx[k]
	if !ok {
		i = int32(len(d.hashes))
		d.hashIdx[k] = i
		d.hashes = append(d.hashes, nil)
	}
	d.hashes[i] = append(d.hashes[i], mix64(hash))
}

// empty reports whether the delta holds nothing to write.
func (d *delta) empty() bool {
	return len(d.cells) == 0 && len(d.hashIdx) == 0 && len(d.allTime) == 0
}

// dimBytes is the key encoding of a dimension id.
func (d *delta) dimBytes(dim uint32) string {
	if dim >= propDimBase {
		return d.vals.strs[dim-propDimBase]
	}
	return oneByte[dim]
}

// oneByte holds every one-byte string, so a dimension byte needs no
// allocation to become a key part.
var oneByte = func() (t [256]string) {
	for i := range t {
		t[i] = string([]byte{byte(i)})
	}
	return t
}()

// bucketKey names one entity's rollups in one bucket: one rowset and one
// sketch set, holding every dimension's values.
type bucketKey struct {
	ent    uint32
	gran   byte
	period uint32
}

// periodsOf returns the hour, day and month buckets an hour belongs to.
func periodsOf(h uint32, months map[day]uint32) []struct {
	gran   byte
	period uint32
} {
	type gp = struct {
		gran   byte
		period uint32
	}
	if h&crossingBit != 0 {
		return []gp{{granCross, h &^ crossingBit}}
	}
	dd := day(h / 24)
	m, ok := months[dd]
	if !ok {
		m = monthOfDay(dd)
		months[dd] = m
	}
	return []gp{{granHour, h}, {granDay, uint32(dd)}, {granMonth, m}}
}

// keep, when not nil, limits what flush writes to the buckets it accepts
// (a rebuilt day writes only its own day's buckets).
type bucketFilter func(gran byte, period uint32) bool

// composite is a row's key within its bucket: the dimension code, then
// the value. Codes are self-delimiting, so composites sort by dimension
// first and a dimension's values are contiguous.
func (d *delta) composite(dim, val uint32) string {
	return d.dimBytes(dim) + d.vals.strs[val]
}

// flush writes the delta to b as merge operands: per entity and bucket
// one rowset and one sketch set. touched is called with the key of every
// sketch set written (the query cache drops its copies).
func (d *delta) flush(b *pebble.Batch, keep bucketFilter, touched func(key []byte)) error {
	months := make(map[day]uint32)
	type cellRef struct {
		key string
		c   *counters
	}
	comps := make(map[[2]uint32]string)
	comp := func(dim, val uint32) string {
		k := [2]uint32{dim, val}
		c, ok := comps[k]
		if !ok {
			c = d.composite(dim, val)
			comps[k] = c
		}
		return c
	}
	groups := make(map[bucketKey][]cellRef)
	for k, i := range d.cells {
		c := &d.counts[i]
		if c.isZero() {
			continue // retracted and re-added within the batch
		}
		for _, p := range periodsOf(k.hour, months) {
			if keep != nil && !keep(p.gran, p.period) {
				continue
			}
			g := bucketKey{k.ent, p.gran, p.period}
			groups[g] = append(groups[g], cellRef{comp(k.dim, k.val), c})
		}
	}
	var kb, vb []byte
	var entries []rowEntry
	for g, refs := range groups {
		slices.SortFunc(refs, func(x, y cellRef) int { return strings.Compare(x.key, y.key) })
		entries = entries[:0]
		for _, r := range refs {
			if n := len(entries); n > 0 && string(entries[n-1].value) == r.key {
				entries[n-1].c.add(r.c)
				continue
			}
			entries = append(entries, rowEntry{value: []byte(r.key), c: *r.c})
		}
		kb = d.appendBucketKey(kb[:0], tabRows, g)
		vb = appendRowset(vb[:0], entries)
		if err := b.Merge(kb, vb, nil); err != nil {
			return fmt.Errorf("cannot stage rollup row: %w", err)
		}
	}
	total := comp(dimTotal, d.vals.id(""))
	for ent, c := range d.allTime {
		if keep != nil && !keep(granAll, 0) {
			break
		}
		kb = d.appendBucketKey(kb[:0], tabRows, bucketKey{ent, granAll, 0})
		vb = appendRowset(vb[:0], []rowEntry{{value: []byte(total), c: *c}})
		if err := b.Merge(kb, vb, nil); err != nil {
			return fmt.Errorf("cannot stage all-time row: %w", err)
		}
	}
	return d.flushSketches(b, months, keep, touched, comp)
}

func (d *delta) flushSketches(b *pebble.Batch, months map[day]uint32, keep bucketFilter, touched func([]byte), comp func(dim, val uint32) string) error {
	type setRef struct {
		key    string
		hashes []uint64
	}
	groups := make(map[bucketKey]map[string][]uint64)
	for k, i := range d.hashIdx {
		hs := d.hashes[i]
		for _, p := range periodsOf(k.hour, months) {
			if keep != nil && !keep(p.gran, p.period) {
				continue
			}
			g := bucketKey{k.ent, p.gran, p.period}
			m := groups[g]
			if m == nil {
				m = make(map[string][]uint64)
				groups[g] = m
			}
			c := comp(k.dim, k.val)
			m[c] = append(m[c], hs...)
		}
	}
	var kb, vb []byte
	var refs []setRef
	var entries []sketchEntry
	var sets []visitorSet
	for g, m := range groups {
		refs = refs[:0]
		for k, hs := range m {
			refs = append(refs, setRef{k, hs})
		}
		slices.SortFunc(refs, func(x, y setRef) int { return strings.Compare(x.key, y.key) })
		entries = entries[:0]
		sets = slices.Grow(sets[:0], len(refs))[:len(refs)]
		for i, r := range refs {
			sets[i] = visitorSet{hashes: r.hashes}
			entries = append(entries, sketchEntry{key: []byte(r.key), set: &sets[i], decoded: true})
		}
		var err error
		if vb, err = appendSketchSet(vb[:0], entries); err != nil {
			return fmt.Errorf("cannot encode sketches: %w", err)
		}
		kb = d.appendBucketKey(kb[:0], tabSketch, g)
		if err := b.Merge(kb, vb, nil); err != nil {
			return fmt.Errorf("cannot stage sketches: %w", err)
		}
		if touched != nil {
			touched(kb)
		}
	}
	return nil
}

// appendBucketKey encodes tab gran period entity.
func (d *delta) appendBucketKey(dst []byte, tab byte, g bucketKey) []byte {
	dst = append(dst, tab, g.gran)
	dst = binary.BigEndian.AppendUint32(dst, g.period)
	return append(dst, d.ents.strs[g.ent]...)
}

// keepHours drops every cell and visitor list outside hours [h0, h1), and
// makes the links' all-time deltas those of the kept hours: what a rebuilt
// day writes.
func (d *delta) keepHours(h0, h1 uint32) {
	in := func(h uint32) bool { h &^= crossingBit; return h >= h0 && h < h1 }
	for k := range d.cells {
		if !in(k.hour) {
			delete(d.cells, k)
		}
	}
	for k := range d.hashIdx {
		if !in(k.hour) {
			delete(d.hashIdx, k)
		}
	}
	clear(d.allTime)
	total := d.vals.id("")
	for k, i := range d.cells {
		e := d.ents.strs[k.ent]
		if e[0] != kindLink || k.dim != dimTotal || k.val != total || k.hour&crossingBit != 0 {
			continue
		}
		c := &d.counts[i]
		d.addAllTime(k.ent, fCount, c[fCount])
		d.addAllTime(k.ent, fBots, c[fBots])
	}
}
