package rollup

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// delta collects, in memory, what one apply (or one rebuilt day) changes:
// counter deltas per (entity, dimension, value, hour) and the visitor
// hashes seen per the same cell. Strings are interned into small ids, so a
// cell is a 16-byte key and adding to it is one map lookup; a visitor is
// one append of (cell, hash) to a flat list, sorted out per cell at flush
// (no slice per cell to grow). flush adds the hours up into the buckets
// written, encodes one rowset and one sketch set per (entity, bucket), and
// writes them as merge operands: nothing stored is read.
type delta struct {
	ents    strTable // kind byte, length byte, entity: the entity part of a key
	vals    strTable // dimension values, and property dimensions' key bytes
	cells   map[cellKey]int32
	recent  *[1 << recentBits]recentCell
	keys    []cellKey // by cell index
	counts  []counters
	visits  []cellHash
	allTime map[uint32]*counters // link entity id -> all-time delta
	// clicked lists the links whose non-bot clicks moved since the click
	// limits last looked (checkClickLimits), repeats included.
	clicked []uint32
	scratch []byte

	// A visit counts under every one of its event-scoped visit dimensions
	// alike, so fold adds to one cell per visit and hour keyed by the tuple
	// of its values (dim tupleDim, val the tuple's id) instead of thirteen,
	// and flush spreads each tuple cell over its dimensions.
	tupleIDs map[visitTuple]uint32
	tuples   []visitTuple
	// epoch names this delta's interned ids; a run caches its tuple id
	// for the epoch it was made in (runTuple).
	epoch uint32

	fs flushScratch
}

// flushScratch is flush's working memory, kept with the delta from
// checkpoint to checkpoint: made afresh, its arrays (a few per cell and
// per visitor) were fresh memory for the kernel to fault in at every
// checkpoint, and garbage after it.
type flushScratch struct {
	live      []bool
	cellComp  []int32
	order     []int32
	rank      []int32
	start     []int32
	fill      []int32
	flat      []uint64
	refs      []flushRef
	comps     []compRef
	compBytes []byte // the composites' bytes
	compIdx   map[[2]uint32]int32
	groupIdx  map[bucketKey]int32
	groups    []bucketKey
	months    map[day]uint32
	rows      []rowEntry
	entries   []sketchEntry
	sets      []visitorSet
	merged    []uint64
	kb, vb    []byte
	dedup     hashSet
	targets   []int32
	tupleAt   []int32
}

// compRef is one composite (dimension, value) of a flush, and its key
// (in flushScratch.compBytes).
type compRef struct {
	dim, val uint32
	key      []byte
}

// init readies the scratch for a flush: nothing of an earlier one is
// kept but memory.
func (fs *flushScratch) init() {
	if fs.compIdx == nil {
		fs.compIdx = make(map[[2]uint32]int32)
		fs.groupIdx = make(map[bucketKey]int32)
		fs.months = make(map[day]uint32)
	}
	clear(fs.compIdx)
	clear(fs.groupIdx)
	fs.comps, fs.compBytes, fs.groups = fs.comps[:0], fs.compBytes[:0], fs.groups[:0]
}

// reset lets go of what the last flush pointed to (the delta is emptied
// and kept): the sketches it wrote are garbage, and a visitor array past
// maxKeptFlushHashes (a checkpoint of unusually many visitors) is not
// kept either.
func (fs *flushScratch) reset() {
	clear(fs.rows)
	clear(fs.entries)
	clear(fs.sets)
	if cap(fs.flat) > maxKeptFlushHashes {
		fs.flat = nil
	}
}

// maxKeptFlushHashes bounds the visitor array a kept delta holds between
// checkpoints (64 MiB); the delta's own arrays are bounded by
// maxKeptCells.
const maxKeptFlushHashes = 8 << 20

// grown returns s with length n, zeroed, in its old array if it fits.
func grown[T any](s []T, n int) []T {
	s = sized(s, n)
	clear(s)
	return s
}

// sized returns s with length n, in its old array if it fits; what it
// holds is left over (the caller writes every element before reading it).
func sized[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4)
	}
	return s[:n]
}

// visitTuple is a visit's value ids under the event-scoped visit
// dimensions, in visitDimIDs order.
type visitTuple [nTupleDims]uint32

// nTupleDims: every visit dimension but entry and exit page, which count
// sessions only (contrib.go) and change within a visit.
const nTupleDims = nVisitDims - 2

// tupleDim marks a tuple cell; no dimension byte or property id is as large.
const tupleDim = 1 << 31

// deltaEpochs numbers deltas, so a run's cached tuple id is never taken
// for another delta's.
var deltaEpochs atomic.Uint32

func (d *delta) tupleID(t *visitTuple) uint32 {
	if id, ok := d.tupleIDs[*t]; ok {
		return id
	}
	id := uint32(len(d.tuples))
	d.tupleIDs[*t] = id
	d.tuples = append(d.tuples, *t)
	return id
}

// cellHash is one visitor seen in one cell (by index).
type cellHash struct {
	cell int32
	hash uint64
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
		cells:   make(map[cellKey]int32),
		recent:  new([1 << recentBits]recentCell),
		allTime: make(map[uint32]*counters), tupleIDs: make(map[visitTuple]uint32),
		epoch: deltaEpochs.Add(1),
	}
}

// reset empties d for the next batch, keeping its maps' and slices'
// memory: a batch's delta holds a few hundred thousand cells, and growing
// them again every batch was a sixth of apply's time. A delta that grew
// past maxKeptCells is not kept.
func (d *delta) reset() bool {
	if cap(d.counts) > maxKeptCells {
		return false
	}
	clear(d.cells)
	d.forgetRecent()
	clear(d.allTime)
	d.clicked = d.clicked[:0]
	clear(d.tupleIDs)
	d.tuples = d.tuples[:0]
	d.epoch = deltaEpochs.Add(1)
	d.keys, d.counts, d.visits = d.keys[:0], d.counts[:0], d.visits[:0]
	d.ents.reset()
	d.vals.reset()
	d.fs.reset()
	return true
}

const maxKeptCells = 1 << 20

// strTable interns strings. Lookups of a []byte key do not allocate.
type strTable struct {
	ids  map[string]uint32
	strs []string
}

func newStrTable() strTable { return strTable{ids: make(map[string]uint32)} }

func (t *strTable) reset() {
	clear(t.ids)
	clear(t.strs) // drop the strings for the collector
	t.strs = t.strs[:0]
}

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

func (d *delta) cell(k cellKey) *counters { return &d.counts[d.cellIndex(k)] }

func (d *delta) cellIndex(k cellKey) int32 {
	r := &d.recent[recentSlot(k)]
	if r.k == k && r.i1 != 0 {
		return r.i1 - 1
	}
	i, ok := d.cells[k]
	if !ok {
		i = int32(len(d.counts))
		d.cells[k] = i
		d.keys = append(d.keys, k)
		d.counts = append(d.counts, counters{})
	}
	*r = recentCell{k, i + 1}
	return i
}

// recentCell is a slot of the delta's direct-mapped cache of cell indices
// in front of the cells map: a checkpoint's map holds hundreds of thousands
// of cells and nearly every lookup in it misses the CPU caches, while a
// few thousand hot cells (site totals, top pages, countries) take most
// lookups. 2^14 slots of 20 bytes stay in L2. i1 is the index plus one (0:
// empty).
type recentCell struct {
	k  cellKey
	i1 int32
}

const recentBits = 14

func recentSlot(k cellKey) uint32 {
	h := uint64(k.ent)*0x9E3779B97F4A7C15 ^ uint64(k.dim)*0xC2B2AE3D27D4EB4F ^
		uint64(k.val)*0x165667B19E3779F9 ^ uint64(k.hour)*0x27D4EB2F165667C5
	return uint32(h >> (64 - recentBits))
}

// forgetRecent empties the cache of cell indices: after cells are deleted
// from the map, or the delta is reset.
func (d *delta) forgetRecent() { clear(d.recent[:]) }

// countAndVisitor adds one to field f of a cell and its visitor to it: one
// lookup for the two.
func (d *delta) countAndVisitor(k cellKey, f int, hash uint64) {
	i := d.cellIndex(k)
	d.counts[i][f]++
	d.visits = append(d.visits, cellHash{i, mix64(hash)})
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
	if f == fCount {
		d.clicked = append(d.clicked, ent)
	}
}

// visitor adds a visitor hash to the cell in the hour of ms.
func (d *delta) visitor(ent, dim, val uint32, ms int64, hash uint64) {
	d.visitorAt(ent, dim, val, hourOf(ms), hash)
}

func (d *delta) visitorAt(ent, dim, val, h uint32, hash uint64) {
	i := d.cellIndex(cellKey{ent, dim, val, h})
	d.visits = append(d.visits, cellHash{i, mix64(hash)})
}

// empty reports whether the delta holds nothing to write.
func (d *delta) empty() bool {
	return len(d.cells) == 0 && len(d.allTime) == 0
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

// bucketPeriod is one bucket of a granularity.
type bucketPeriod struct {
	gran   byte
	period uint32
}

// periodsOf returns the hour, day and month buckets an hour belongs to
// (one, a crossing, for a crossing hour): an array, so a flush's places
// allocate nothing per cell.
func periodsOf(h uint32, months map[day]uint32) ([3]bucketPeriod, int) {
	if h&crossingBit != 0 {
		return [3]bucketPeriod{{granCross, h &^ crossingBit}}, 1
	}
	dd := day(h / 24)
	m, ok := months[dd]
	if !ok {
		m = monthOfDay(dd)
		months[dd] = m
	}
	return [3]bucketPeriod{{granHour, h}, {granDay, uint32(dd)}, {granMonth, m}}, 3
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

// flushRef places one cell in one bucket: the bucket's index and the rank
// of the cell's composite among the batch's composites.
type flushRef struct {
	group, rank, cell int32
}

// flush writes the delta to b as merge operands: per entity and bucket
// one rowset and one sketch set. touched is called with the key of every
// rowset and sketch set written (the query cache drops its copies).
//
// Every live cell is placed in the buckets it is written to (its hour, and
// its day and month where keep accepts them); the places are sorted by
// bucket and by composite rank (integers: the composites are sorted once),
// and each bucket's run of places becomes one rowset and one sketch set.
// The visitors are bucketed by cell with a counting sort, so a cell's
// hashes are one contiguous slice.
func (d *delta) flush(b *pebble.Batch, keep bucketFilter, touched func(key []byte)) error {
	if err := d.flushAllTime(b, keep); err != nil {
		return err
	}
	d.spreadTuples()
	fs := &d.fs
	fs.init()
	n := len(d.keys)
	live := grown(fs.live, n)
	fs.live = live
	for _, i := range d.cells {
		live[i] = true
	}
	// The composites, ranked.
	comps := fs.comps[:0]
	cellComp := sized(fs.cellComp, n) // read only where written: live cells
	fs.cellComp = cellComp
	for i, k := range d.keys {
		if !live[i] {
			continue
		}
		ck := [2]uint32{k.dim, k.val}
		c, ok := fs.compIdx[ck]
		if !ok {
			c = int32(len(comps))
			fs.compIdx[ck] = c
			off := len(fs.compBytes)
			fs.compBytes = append(append(fs.compBytes, d.dimBytes(k.dim)...), d.vals.strs[k.val]...)
			comps = append(comps, compRef{k.dim, k.val, fs.compBytes[off:len(fs.compBytes):len(fs.compBytes)]})
		}
		cellComp[i] = c
	}
	fs.comps = comps
	order := sized(fs.order, len(comps))
	fs.order = order
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(x, y int32) int { return bytes.Compare(comps[x].key, comps[y].key) })
	rank := sized(fs.rank, len(comps))
	fs.rank = rank
	for r, c := range order {
		rank[c] = int32(r)
	}
	// Visitors by cell.
	start := grown(fs.start, n+1)
	fs.start = start
	for _, v := range d.visits {
		start[v.cell+1]++
	}
	for i := 1; i <= n; i++ {
		start[i] += start[i-1]
	}
	flat := sized(fs.flat, len(d.visits))
	fs.flat = flat
	fill := sized(fs.fill, n)
	fs.fill = fill
	copy(fill, start[:n])
	for _, v := range d.visits {
		flat[fill[v.cell]] = v.hash
		fill[v.cell]++
	}
	hashesOf := func(i int32) []uint64 { return flat[start[i]:start[i+1]] }
	// Places.
	groups := fs.groups[:0]
	refs := fs.refs[:0]
	for i, k := range d.keys {
		if !live[i] || (d.counts[i].isZero() && start[i] == start[i+1]) {
			continue // nothing left: retracted and re-added within the batch
		}
		ps, np := periodsOf(k.hour, fs.months)
		for _, p := range ps[:np] {
			if keep != nil && !keep(p.gran, p.period) {
				continue
			}
			g := bucketKey{k.ent, p.gran, p.period}
			gi, ok := fs.groupIdx[g]
			if !ok {
				gi = int32(len(groups))
				fs.groupIdx[g] = gi
				groups = append(groups, g)
			}
			refs = append(refs, flushRef{gi, rank[cellComp[i]], int32(i)})
		}
	}
	fs.groups, fs.refs = groups, refs
	slices.SortFunc(refs, func(x, y flushRef) int {
		if x.group != y.group {
			return int(x.group - y.group)
		}
		return int(x.rank - y.rank)
	})
	kb, vb := fs.kb, fs.vb
	defer func() { fs.kb, fs.vb = kb, vb }()
	for lo := 0; lo < len(refs); {
		hi := lo + 1
		for hi < len(refs) && refs[hi].group == refs[lo].group {
			hi++
		}
		g := groups[refs[lo].group]
		rows, entries, sets := fs.rows[:0], fs.entries[:0], fs.sets[:0]
		merged := fs.merged[:0]
		for i := lo; i < hi; {
			j := i + 1
			for j < hi && refs[j].rank == refs[i].rank {
				j++
			}
			key := comps[order[refs[i].rank]].key
			var c counters
			from := len(merged)
			for _, r := range refs[i:j] {
				c.add(&d.counts[r.cell])
				merged = append(merged, hashesOf(r.cell)...)
			}
			if !c.isZero() {
				rows = append(rows, rowEntry{value: key, c: c})
			}
			if len(merged) > from {
				sets = append(sets, fs.dedup.visitorSet(merged[from:]))
				merged = merged[:from+len(sets[len(sets)-1].hashes)]
				entries = append(entries, sketchEntry{key: key, decoded: true})
			}
			i = j
		}
		fs.rows, fs.entries, fs.sets, fs.merged = rows, entries, sets, merged
		if len(rows) > 0 {
			kb = d.appendBucketKey(kb[:0], tabRows, g)
			vb = appendRowset(vb[:0], rows)
			if err := b.Merge(kb, vb, nil); err != nil {
				return fmt.Errorf("cannot stage rollup row: %w", err)
			}
			if touched != nil {
				touched(kb)
			}
		}
		if len(entries) > 0 {
			for i := range entries {
				entries[i].set = &sets[i]
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
		lo = hi
	}
	return nil
}

// spreadTuples moves every tuple cell's counters and visitors to the
// cells of its dimensions' values, and drops the tuple cell.
func (d *delta) spreadTuples() {
	n := len(d.keys)
	targets := d.fs.targets[:0] // per tuple cell, nTupleDims target cells
	// at[cell] is 1 + the offset of a tuple cell's targets, 0 for
	// another cell: an array, as every visitor is looked up in it.
	at := grown(d.fs.tupleAt, n)
	d.fs.tupleAt = at
	tuples := 0
	defer func() { d.fs.targets = targets }()
	for i := range n {
		k := d.keys[i]
		if k.dim != tupleDim {
			continue
		}
		if _, live := d.cells[k]; !live {
			continue
		}
		delete(d.cells, k)
		d.recent[recentSlot(k)] = recentCell{}
		at[i] = int32(len(targets)) + 1
		tuples++
		c := d.counts[i]
		t := &d.tuples[k.val]
		for j := range nTupleDims {
			ti := d.cellIndex(cellKey{k.ent, uint32(visitDimIDs[j]), t[j], k.hour})
			d.counts[ti].add(&c)
			targets = append(targets, ti)
		}
	}
	if tuples == 0 {
		return
	}
	for _, v := range d.visits[:len(d.visits)] {
		if off := at[v.cell] - 1; off >= 0 {
			for _, ti := range targets[off : off+int32(nTupleDims)] {
				d.visits = append(d.visits, cellHash{ti, v.hash})
			}
		}
	}
}

// flushAllTime writes the links' all-time deltas.
func (d *delta) flushAllTime(b *pebble.Batch, keep bucketFilter) error {
	if keep != nil && !keep(granAll, 0) {
		return nil
	}
	total := d.composite(dimTotal, d.vals.id(""))
	var kb, vb []byte
	for ent, c := range d.allTime {
		kb = d.appendBucketKey(kb[:0], tabRows, bucketKey{ent, granAll, 0})
		vb = appendRowset(vb[:0], []rowEntry{{value: []byte(total), c: *c}})
		if err := b.Merge(kb, vb, nil); err != nil {
			return fmt.Errorf("cannot stage all-time row: %w", err)
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
			delete(d.cells, k) // its visitors go with it: flush skips dead cells
		}
	}
	d.forgetRecent()
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
