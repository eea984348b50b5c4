package rollup

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
)

// A sketch set is the visitor sets of every value of every dimension of
// one entity in one bucket, under one key, sorted by the value's composite
// key (dimension code, then value). A batch then writes one sketch key per
// entity and bucket, not one per value: sparse data (a link clicked a few
// times an hour) costs one key instead of nine, and a breakdown reads one
// key per bucket.
//
//	version byte | uvarint count | count x (uvarint len | composite | uvarint len | visitor set)
const sketchSetVersion = 1

// sketchEntry is one value of a sketch set: its encoded visitor set, or,
// once merged with another, the decoded union.
type sketchEntry struct {
	key     []byte
	raw     []byte
	set     *visitorSet
	decoded bool
}

// appendSketchSet encodes entries, sorted by key.
func appendSketchSet(dst []byte, entries []sketchEntry) ([]byte, error) {
	dst = append(dst, sketchSetVersion)
	dst = binary.AppendUvarint(dst, uint64(len(entries)))
	var vb []byte
	for i := range entries {
		e := &entries[i]
		dst = binary.AppendUvarint(dst, uint64(len(e.key)))
		dst = append(dst, e.key...)
		v := e.raw
		if e.decoded {
			e.set.compact()
			var err error
			if vb, err = e.set.appendTo(vb[:0]); err != nil {
				return nil, err
			}
			v = vb
		}
		dst = binary.AppendUvarint(dst, uint64(len(v)))
		dst = append(dst, v...)
	}
	return dst, nil
}

// forEachSketch calls fn for each entry of an encoded sketch set whose
// composite key starts with prefix (all when empty), in key order. The
// slices alias b.
func forEachSketch(b, prefix []byte, fn func(key, set []byte) error) error {
	if len(b) == 0 || b[0] != sketchSetVersion {
		return fmt.Errorf("%w: sketch set version", errBadOperand)
	}
	n, k := binary.Uvarint(b[1:])
	if k <= 0 || n > uint64(len(b)) {
		return fmt.Errorf("%w: sketch set count", errBadOperand)
	}
	b = b[1+k:]
	for range n {
		kl, k := binary.Uvarint(b)
		if k <= 0 || kl > uint64(len(b)-k) {
			return fmt.Errorf("%w: sketch set key", errBadOperand)
		}
		key := b[k : k+int(kl)]
		b = b[k+int(kl):]
		vl, k2 := binary.Uvarint(b)
		if k2 <= 0 || vl > uint64(len(b)-k2) {
			return fmt.Errorf("%w: sketch set value", errBadOperand)
		}
		v := b[k2 : k2+int(vl)]
		b = b[k2+int(vl):]
		if len(prefix) > 0 && !bytes.HasPrefix(key, prefix) {
			if bytes.Compare(key, prefix) > 0 {
				return nil // sorted: past every key with the prefix
			}
			continue
		}
		if err := fn(key, v); err != nil {
			return err
		}
	}
	if len(b) != 0 {
		return fmt.Errorf("%w: trailing bytes after sketch set", errBadOperand)
	}
	return nil
}

// sketchSetMerger unions sketch sets entry by entry. An entry that occurs
// in one operand only is copied as it is; only entries present in several
// are decoded and merged.
type sketchSetMerger struct {
	entries []sketchEntry
	spare   []sketchEntry // the other half of a double buffer with entries
	in      []sketchEntry
	arena   []byte
	sets    []visitorSet // decoded unions; entries point into it
	buf     []byte       // the finished value
}

func (m *sketchSetMerger) reset() {
	m.entries, m.spare, m.in = m.entries[:0], m.spare[:0], m.in[:0]
	m.arena = m.arena[:0]
	// The sets' backing arrays are kept only if small: a dense sketch
	// holds 16 KiB.
	if cap(m.sets) > 64 {
		m.sets = nil
	}
	m.sets = m.sets[:0]
}

// newSet returns an empty visitor set owned by the merger. A pointer into
// an earlier array stays valid when sets grows.
func (m *sketchSetMerger) newSet() *visitorSet {
	m.sets = append(m.sets, visitorSet{})
	return &m.sets[len(m.sets)-1]
}

func (m *sketchSetMerger) own(b []byte) []byte {
	if cap(m.arena)-len(m.arena) < len(b) {
		// Grow geometrically from the first operand's size: most merges
		// are of two or three small operands.
		m.arena = make([]byte, 0, max(2*len(b), min(2*cap(m.arena), 1<<20)))
	}
	off := len(m.arena)
	m.arena = append(m.arena, b...)
	return m.arena[off:len(m.arena):len(m.arena)]
}

func (m *sketchSetMerger) add(op []byte) error { return m.addOwned(m.own(op)) }

// addOwned merges an operand whose bytes stay valid and unchanged for the
// merger's life.
func (m *sketchSetMerger) addOwned(op []byte) error {
	in := m.in[:0]
	err := forEachSketch(op, nil, func(key, set []byte) error {
		in = append(in, sketchEntry{key: key, raw: set})
		return nil
	})
	if err != nil {
		return err
	}
	out := m.spare[:0]
	i, j := 0, 0
	for i < len(m.entries) || j < len(in) {
		switch {
		case j == len(in) || (i < len(m.entries) && bytes.Compare(m.entries[i].key, in[j].key) < 0):
			out = append(out, m.entries[i])
			i++
		case i == len(m.entries) || bytes.Compare(in[j].key, m.entries[i].key) < 0:
			out = append(out, in[j])
			j++
		default:
			e := m.entries[i]
			if !e.decoded {
				e.set = m.newSet()
				if err := e.set.addValue(e.raw); err != nil {
					return err
				}
				e.decoded = true
			}
			if err := e.set.addValue(in[j].raw); err != nil {
				return err
			}
			out = append(out, e)
			i, j = i+1, j+1
		}
	}
	m.entries, m.spare = out, m.entries[:0]
	m.in = in[:0]
	return nil
}

func (m *sketchSetMerger) MergeNewer(v []byte) error { return m.add(v) }
func (m *sketchSetMerger) MergeOlder(v []byte) error { return m.add(v) }

func (m *sketchSetMerger) Finish(bool) ([]byte, io.Closer, error) {
	v, err := appendSketchSet(m.buf[:0], m.entries)
	m.buf = v
	return v, nil, err
}
