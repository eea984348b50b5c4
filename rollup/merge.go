package rollup

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/axiomhq/hyperloglog"
	"github.com/cockroachdb/pebble/v2"
)

// The aggregator writes every counter and sketch as a Pebble merge operand:
// a batch adds what it folded without reading what is stored. Pebble
// combines operands when it reads a key and when it flushes or compacts,
// with the merger below. Every merge is a sum (counters) or a set union
// (visitor hashes), so it is associative and commutative, as Pebble
// requires, and operands can be combined in any grouping.

// mergerName is stored in the database's OPTIONS file; Pebble refuses to
// open a database with another merger, which is how a database of the
// first format (plain values, no merger) is recognised.
const mergerName = "waymark.rollup.v2"

var rollupMerger = &pebble.Merger{Name: mergerName, Merge: newValueMerger}

// errBadOperand is returned by the merger for bytes it cannot decode.
var errBadOperand = errors.New("malformed rollup merge operand")

func newValueMerger(key, value []byte) (pebble.ValueMerger, error) {
	if len(key) == 0 {
		return nil, fmt.Errorf("%w: empty key", errBadOperand)
	}
	switch key[0] {
	case tabRows, tabSketch, tabDayCounter, tabTotal, tabDay, tabDropped:
	default:
		return nil, fmt.Errorf("%w: no merge for table %q", errBadOperand, key[0])
	}
	l := mergerPool.Get().(*lazyMerger)
	l.table = key[0]
	l.first = append(l.first[:0], value...)
	return l, nil
}

// mergerPool recycles mergers and their buffers: a compaction makes one
// per key it merges, and allocating their arenas and slices afresh was
// most of the merge's cost. A merger returns to the pool when Pebble
// closes the value it finished (Finish hands the merger out as the value's
// io.Closer), so a value is never reused while Pebble holds it.
var mergerPool = sync.Pool{New: func() any { return new(lazyMerger) }}

// operandMerger is a merger of one table's operands.
type operandMerger interface {
	pebble.ValueMerger
	add(op []byte) error
	reset()
}

// lazyMerger decodes nothing until a second operand arrives: most keys
// reach a memtable flush with one operand (a checkpoint writes each of
// its buckets once), and that operand is already the merged value, so it
// is written out as it came instead of being decoded and encoded again.
type lazyMerger struct {
	table byte
	first []byte
	m     operandMerger // one of the three below, once a second operand came
	rows  rowsetMerger
	sets  sketchSetMerger
	vec   vectorMerger
}

func (l *lazyMerger) start() error {
	switch l.table {
	case tabRows:
		l.m = &l.rows
	case tabSketch:
		l.m = &l.sets
	default:
		l.m = &l.vec
	}
	l.m.reset()
	if l.m == &l.sets {
		return l.sets.addOwned(l.first) // first is the merger's own copy
	}
	return l.m.add(l.first)
}

func (l *lazyMerger) MergeNewer(v []byte) error {
	if l.m == nil {
		if err := l.start(); err != nil {
			return err
		}
	}
	return l.m.add(v)
}

func (l *lazyMerger) MergeOlder(v []byte) error { return l.MergeNewer(v) }

func (l *lazyMerger) Finish(includesBase bool) ([]byte, io.Closer, error) {
	if l.m == nil {
		return l.first, l, nil
	}
	v, _, err := l.m.Finish(includesBase)
	if err != nil {
		return nil, nil, err
	}
	return v, l, nil
}

// DeletableFinish drops a merged row that sums to zero (a retraction
// that met what it retracts). A lone operand is kept: the writer never
// writes a zero one.
func (l *lazyMerger) DeletableFinish(includesBase bool) ([]byte, bool, io.Closer, error) {
	if d, ok := l.m.(pebble.DeletableValueMerger); ok {
		v, del, _, err := d.DeletableFinish(includesBase)
		if err != nil || del {
			l.Close()
			return nil, del, nil, err
		}
		return v, false, l, nil
	}
	v, c, err := l.Finish(includesBase)
	return v, false, c, err
}

// Close returns the merger to the pool once Pebble is done with the value
// it finished.
func (l *lazyMerger) Close() error {
	l.m = nil
	mergerPool.Put(l)
	return nil
}

// counters is one row of numbers; what each field means is in rollup.go.
type counters [nFields]int64

func (c *counters) add(o *counters) {
	for i := range c {
		c[i] += o[i]
	}
}

func (c *counters) isZero() bool { return *c == counters{} }

// appendCounters encodes c as a field count and zigzag varints, with
// trailing zero fields cut: operands are mostly one or two fields.
func appendCounters(dst []byte, c *counters) []byte {
	n := nFields
	for n > 0 && c[n-1] == 0 {
		n--
	}
	dst = append(dst, byte(n))
	for i := range n {
		dst = binary.AppendVarint(dst, c[i])
	}
	return dst
}

// readCounters decodes one appendCounters encoding from the front of b.
func readCounters(b []byte, c *counters) ([]byte, error) {
	*c = counters{}
	if len(b) == 0 || int(b[0]) > nFields {
		return nil, fmt.Errorf("%w: counter field count", errBadOperand)
	}
	n := int(b[0])
	b = b[1:]
	for i := range n {
		v, k := binary.Varint(b)
		if k <= 0 {
			return nil, fmt.Errorf("%w: counter varint", errBadOperand)
		}
		c[i] = v
		b = b[k:]
	}
	return b, nil
}

// decodeCounters decodes a value that is exactly one counter vector.
func decodeCounters(b []byte, c *counters) error {
	rest, err := readCounters(b, c)
	if err == nil && len(rest) != 0 {
		err = fmt.Errorf("%w: trailing bytes after counters", errBadOperand)
	}
	return err
}

// vectorMerger sums counter vectors: the per-day event counts, their
// totals and the day records.
type vectorMerger struct {
	sum counters
	buf []byte
}

func (m *vectorMerger) reset() { m.sum = counters{} }

func (m *vectorMerger) add(op []byte) error {
	var c counters
	if err := decodeCounters(op, &c); err != nil {
		return err
	}
	m.sum.add(&c)
	return nil
}

func (m *vectorMerger) MergeNewer(v []byte) error { return m.add(v) }
func (m *vectorMerger) MergeOlder(v []byte) error { return m.add(v) }

func (m *vectorMerger) Finish(bool) ([]byte, io.Closer, error) {
	return appendCounters(m.buf[:0], &m.sum), nil, nil
}

func (m *vectorMerger) DeletableFinish(bool) ([]byte, bool, io.Closer, error) {
	if m.sum.isZero() {
		return nil, true, nil, nil // zero is the sum's identity: nothing to keep
	}
	v, c, err := m.Finish(true)
	return v, false, c, err
}

// A rowset is one wide row: the counters of every value of one dimension
// of one entity in one bucket, sorted by value. One key per bucket means a
// 30-day breakdown reads 30 keys, not one per value per day.
//
//	version byte | uvarint count | count x (uvarint len | value | counters)
const rowsetVersion = 1

// rowEntry is one value of a rowset.
type rowEntry struct {
	value []byte
	c     counters
}

// appendRowset encodes entries (sorted by value, zero entries left out).
func appendRowset(dst []byte, entries []rowEntry) []byte {
	n := 0
	for i := range entries {
		if !entries[i].c.isZero() {
			n++
		}
	}
	dst = append(dst, rowsetVersion)
	dst = binary.AppendUvarint(dst, uint64(n))
	for i := range entries {
		e := &entries[i]
		if e.c.isZero() {
			continue
		}
		dst = binary.AppendUvarint(dst, uint64(len(e.value)))
		dst = append(dst, e.value...)
		dst = appendCounters(dst, &e.c)
	}
	return dst
}

// forEachRow calls fn for each entry of an encoded rowset, in value order.
// The value aliases b.
func forEachRow(b []byte, fn func(value []byte, c *counters) error) error {
	return forEachRowPrefix(b, nil, fn)
}

// forEachRowPrefix is forEachRow for the entries whose value starts with
// prefix: it stops at the first entry past them (values are sorted), so
// reading a rowset's total row, which sorts first, decodes one entry, not
// the thousands of pages beside it.
func forEachRowPrefix(b, prefix []byte, fn func(value []byte, c *counters) error) error {
	if len(b) == 0 || b[0] != rowsetVersion {
		return fmt.Errorf("%w: rowset version", errBadOperand)
	}
	n, k := binary.Uvarint(b[1:])
	if k <= 0 || n > uint64(len(b)) {
		return fmt.Errorf("%w: rowset count", errBadOperand)
	}
	b = b[1+k:]
	var c counters
	for range n {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return fmt.Errorf("%w: rowset value", errBadOperand)
		}
		value := b[k : k+int(l)]
		if len(prefix) > 0 && !bytes.HasPrefix(value, prefix) && bytes.Compare(value, prefix) > 0 {
			return nil // sorted: past every value with the prefix
		}
		rest, err := readCounters(b[k+int(l):], &c)
		if err != nil {
			return err
		}
		b = rest
		if len(prefix) > 0 && !bytes.HasPrefix(value, prefix) {
			continue
		}
		if err := fn(value, &c); err != nil {
			return err
		}
	}
	if len(b) != 0 {
		return fmt.Errorf("%w: trailing bytes after rowset", errBadOperand)
	}
	return nil
}

// rowsetMerger sums rowsets value by value. Each operand is merged in as it
// comes (a linear merge of two sorted lists); values are copied, since
// Pebble keeps ownership of operand bytes.
type rowsetMerger struct {
	entries []rowEntry
	spare   []rowEntry // the other half of a double buffer with entries
	scratch []rowEntry
	arena   []byte
	buf     []byte // the finished value
}

func (m *rowsetMerger) reset() {
	m.entries, m.spare, m.scratch = m.entries[:0], m.spare[:0], m.scratch[:0]
	m.arena = m.arena[:0]
}

func (m *rowsetMerger) add(op []byte) error {
	in := m.scratch[:0]
	err := forEachRow(op, func(v []byte, c *counters) error {
		in = append(in, rowEntry{value: v, c: *c})
		return nil
	})
	if err != nil {
		return err
	}
	out := m.spare[:0]
	i, j := 0, 0
	for i < len(m.entries) || j < len(in) {
		switch {
		case j == len(in) || (i < len(m.entries) && bytes.Compare(m.entries[i].value, in[j].value) < 0):
			out = append(out, m.entries[i])
			i++
		case i == len(m.entries) || bytes.Compare(in[j].value, m.entries[i].value) < 0:
			out = append(out, rowEntry{value: m.own(in[j].value), c: in[j].c})
			j++
		default:
			e := m.entries[i]
			e.c.add(&in[j].c)
			out = append(out, e)
			i, j = i+1, j+1
		}
	}
	m.entries, m.spare = out, m.entries[:0]
	m.scratch = in[:0]
	return nil
}

// own copies b into the merger's arena. Earlier values keep pointing into
// older arrays when the arena grows, which stay valid.
func (m *rowsetMerger) own(b []byte) []byte {
	if cap(m.arena)-len(m.arena) < len(b) {
		m.arena = make([]byte, 0, max(512, 2*len(b), min(2*cap(m.arena), 1<<20)))
	}
	off := len(m.arena)
	m.arena = append(m.arena, b...)
	return m.arena[off:len(m.arena):len(m.arena)]
}

func (m *rowsetMerger) MergeNewer(v []byte) error { return m.add(v) }
func (m *rowsetMerger) MergeOlder(v []byte) error { return m.add(v) }

func (m *rowsetMerger) Finish(bool) ([]byte, io.Closer, error) {
	m.buf = appendRowset(m.buf[:0], m.entries)
	return m.buf, nil, nil
}

func (m *rowsetMerger) DeletableFinish(bool) ([]byte, bool, io.Closer, error) {
	for i := range m.entries {
		if !m.entries[i].c.isZero() {
			v, c, err := m.Finish(true)
			return v, false, c, err
		}
	}
	return nil, true, nil, nil
}

// Sketch values. A small set of visitors is kept as the sorted list of
// their (mixed) hashes: exact, and smaller than a sketch. Past
// maxListHashes it becomes a HyperLogLog sketch (axiomhq, p = 14, sparse
// first), which every other sketch merges with.
//
//	'L' | uvarint count | count x uvarint delta from the previous hash
//	'S' | axiomhq binary encoding
const (
	sketchList    = 'L'
	sketchHLL     = 'S'
	maxListHashes = 128
)

// sketchPrecision is the one HyperLogLog precision used everywhere, so
// every sketch merges with every other: 2^14 registers, a standard error
// of 1.04/sqrt(16384) = 0.81 %.
const sketchPrecision = 14

func newSketch() *hyperloglog.Sketch {
	sk, err := hyperloglog.NewSketch(sketchPrecision, true)
	if err != nil {
		panic("BUG: " + err.Error())
	}
	return sk
}

// appendHashList encodes sorted, distinct hashes as a list value.
func appendHashList(dst []byte, hashes []uint64) []byte {
	dst = append(dst, sketchList)
	dst = binary.AppendUvarint(dst, uint64(len(hashes)))
	prev := uint64(0)
	for _, h := range hashes {
		dst = binary.AppendUvarint(dst, h-prev)
		prev = h
	}
	return dst
}

// visitorSet is a decoded sketch value: a list of hashes, a sketch, or
// both while merging.
type visitorSet struct {
	hashes []uint64
	sk     *hyperloglog.Sketch
	// dense is set once sk is a dense sketch: unions of large sketches
	// are merged into 2^14 registers (a pass over the other's entries),
	// where merging two sparse ones goes through a hash set per entry;
	// small ones stay sparse, which encodes far smaller.
	dense bool
}

// denseMergeBytes is the encoded size past which sketches are merged
// dense; denseBuildHashes the number of new hashes past which a sketch
// takes them dense.
const (
	denseMergeBytes  = 4096
	denseBuildHashes = 2048
)

// toDense makes s's sketch a dense one holding the same registers.
func (s *visitorSet) toDense() error {
	if s.dense {
		return nil
	}
	d, err := hyperloglog.NewSketch(sketchPrecision, false)
	if err != nil {
		panic("BUG: " + err.Error())
	}
	if s.sk != nil {
		if err := d.Merge(s.sk); err != nil {
			return err
		}
	}
	s.sk, s.dense = d, true
	return nil
}

// addValue merges one encoded sketch value into s.
func (s *visitorSet) addValue(b []byte) error {
	if len(b) == 0 {
		return fmt.Errorf("%w: empty sketch", errBadOperand)
	}
	switch b[0] {
	case sketchList:
		n, k := binary.Uvarint(b[1:])
		if k <= 0 || n > uint64(len(b)) {
			return fmt.Errorf("%w: hash list count", errBadOperand)
		}
		b = b[1+k:]
		prev := uint64(0)
		for range n {
			d, k := binary.Uvarint(b)
			if k <= 0 {
				return fmt.Errorf("%w: hash list", errBadOperand)
			}
			prev += d
			s.hashes = append(s.hashes, prev)
			b = b[k:]
		}
		if len(b) != 0 {
			return fmt.Errorf("%w: trailing bytes after hash list", errBadOperand)
		}
		return nil
	case sketchHLL:
		var sk hyperloglog.Sketch
		if err := sk.UnmarshalBinary(b[1:]); err != nil {
			return fmt.Errorf("%w: %v", errBadOperand, err)
		}
		if s.sk == nil {
			s.sk = &sk
			return nil
		}
		if len(b) > denseMergeBytes {
			if err := s.toDense(); err != nil {
				return err
			}
		}
		return s.sk.Merge(&sk)
	}
	return fmt.Errorf("%w: sketch format %q", errBadOperand, b[0])
}

// compact sorts and deduplicates the list, and folds it into the sketch
// when there is one or when it has grown past maxListHashes.
func (s *visitorSet) compact() {
	if !slices.IsSorted(s.hashes) { // a checkpoint's sets come sorted
		slices.Sort(s.hashes)
	}
	s.hashes = slices.Compact(s.hashes)
	if s.sk == nil && len(s.hashes) <= maxListHashes {
		return
	}
	s.insertDistinct()
}

// insertDistinct moves the hashes, distinct and in any order, into the
// sketch.
func (s *visitorSet) insertDistinct() {
	if s.sk == nil {
		s.sk = newSketch()
	}
	if len(s.hashes) > denseBuildHashes {
		// A sparse sketch merges its insert buffer into its list every
		// 164 inserts, so building one from n hashes costs n²/328 list
		// steps; 2^14 registers take each hash in a few nanoseconds, and
		// past this many hashes encode hardly larger.
		if err := s.toDense(); err != nil {
			panic("BUG: merging a sketch of our own precision: " + err.Error())
		}
	}
	for _, h := range s.hashes {
		s.sk.InsertHash(h)
	}
	s.hashes = s.hashes[:0]
}

// appendTo encodes the set (after compact).
func (s *visitorSet) appendTo(dst []byte) ([]byte, error) {
	if s.sk == nil {
		return appendHashList(dst, s.hashes), nil
	}
	dst = append(dst, sketchHLL)
	return s.sk.AppendBinary(dst)
}

// estimate is the number of distinct visitors: exact for a list.
func (s *visitorSet) estimate() uint64 {
	s.compact()
	if s.sk == nil {
		return uint64(len(s.hashes))
	}
	return s.sk.Estimate()
}

// merge unions o into s. A union of sketches is kept dense: merging into
// 2^14 registers is a pass over the other's entries, where merging two
// sparse sketches goes through a hash set per entry.
func (s *visitorSet) merge(o *visitorSet) error {
	s.hashes = append(s.hashes, o.hashes...)
	if o.sk == nil {
		return nil
	}
	if err := s.toDense(); err != nil {
		return err
	}
	return s.sk.Merge(o.sk)
}
