package rollup

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/waymark/waymark/ingest"
)

// Raw events are kept as blocks: one value per (UTC day, segment) holding
// that segment's events of the day, back to back, as the edge encoded
// them. Storing a segment is then one key per day it touches (one, except
// at midnight) instead of one per event, and reading a day back is a
// sequential scan of few large values. The key starts with the day and the
// block's first event time, so blocks of a day come roughly in time order
// (a segment spans its rotation age, seconds) and retention drops a day
// with one DeleteRange.
//
//	version byte | uvarint count | varint last-first ms | count x (uvarint len | event)
const blockVersion = 1

// blockBuilder collects one segment's events per day.
type blockBuilder struct {
	days map[day]*block
	free []*block // emptied blocks, reused: a batch builds one per segment
}

type block struct {
	first, last int64
	count       int
	// recs is the value being built: headerRoom bytes left free for the
	// header, then the records.
	recs []byte
}

// headerRoom fits the largest header: the version byte and two varints.
const headerRoom = 1 + 2*binary.MaxVarintLen64

func (bb *blockBuilder) reset() {
	for _, b := range bb.days {
		bb.free = append(bb.free, b)
	}
	clear(bb.days)
}

func (bb *blockBuilder) add(d day, ms int64, payload []byte) {
	if bb.days == nil {
		bb.days = make(map[day]*block)
	}
	b := bb.days[d]
	if b == nil {
		if n := len(bb.free); n > 0 {
			b, bb.free = bb.free[n-1], bb.free[:n-1]
		} else {
			b = new(block)
		}
		b.first, b.last, b.count = ms, ms, 0
		b.recs = append(b.recs[:0], make([]byte, headerRoom)...)
		bb.days[d] = b
	}
	b.first, b.last = min(b.first, ms), max(b.last, ms)
	b.count++
	b.recs = binary.AppendUvarint(b.recs, uint64(len(payload)))
	b.recs = append(b.recs, payload...)
}

// stage writes the blocks to wb under ref, adds the bytes staged per day
// to sizes (for the day records), and returns entry with the key of each
// block appended (the segment's journal entry; empty when no block).
func (bb *blockBuilder) stage(wb *pebble.Batch, ref ingest.SegmentRef, sizes map[day]dayStat, entry []byte) ([]byte, error) {
	var kb []byte
	var hdr [headerRoom]byte
	for d, b := range bb.days {
		if b.count == 0 {
			continue
		}
		kb = appendEventBlockKey(kb[:0], d, b.first, ref)
		h := append(hdr[:0], blockVersion)
		h = binary.AppendUvarint(h, uint64(b.count))
		h = binary.AppendVarint(h, b.last-b.first)
		vb := b.recs[headerRoom-len(h):]
		copy(vb, h)
		if err := wb.Set(kb, vb, nil); err != nil {
			return entry, fmt.Errorf("cannot stage raw events: %w", err)
		}
		entry = appendJournalBlock(entry, kb)
		st := sizes[d]
		st.events += uint64(b.count)
		st.bytes += uint64(len(kb) + len(vb))
		sizes[d] = st
		b.recs, b.count = b.recs[:headerRoom], 0
	}
	return entry, nil
}

// blockSpan reads a block's header: its event count and the time of its
// last event (the first is in the key).
func blockSpan(key, v []byte) (count uint64, first, last int64, err error) {
	if len(key) < 13 || len(v) < 1 || v[0] != blockVersion {
		return 0, 0, 0, fmt.Errorf("cannot read raw block %x: bad header", key)
	}
	first = int64(binary.BigEndian.Uint64(key[5:13]))
	count, k := binary.Uvarint(v[1:])
	if k <= 0 {
		return 0, 0, 0, fmt.Errorf("cannot read raw block %x: bad count", key)
	}
	span, k2 := binary.Varint(v[1+k:])
	if k2 <= 0 {
		return 0, 0, 0, fmt.Errorf("cannot read raw block %x: bad span", key)
	}
	return count, first, first + span, nil
}

// forEachInBlock decodes every event of a block into ev and calls fn.
func forEachInBlock(key, v []byte, ev *ingest.Event, fn func(ev *ingest.Event) error) error {
	return forEachRecord(key, v, func(rec []byte) error {
		if err := ingest.DecodeEvent(rec, ev); err != nil {
			return fmt.Errorf("cannot read raw block %x: %w", key, err)
		}
		return fn(ev)
	})
}

// forEachRecord calls fn with each encoded event of a block, so a caller
// can skip records before decoding them.
func forEachRecord(key, v []byte, fn func(rec []byte) error) error {
	count, _, _, err := blockSpan(key, v)
	if err != nil {
		return err
	}
	_, k := binary.Uvarint(v[1:])
	_, k2 := binary.Varint(v[1+k:])
	b := v[1+k+k2:]
	for range count {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return fmt.Errorf("cannot read raw block %x: bad record", key)
		}
		if err := fn(b[k : k+int(n)]); err != nil {
			return err
		}
		b = b[k+int(n):]
	}
	if len(b) != 0 {
		return fmt.Errorf("cannot read raw block %x: trailing bytes", key)
	}
	return nil
}

// scanEvents calls fn for every stored event of days [d0, d1), blocks in
// key order; within a block, events in segment order. fn's event is
// reused between calls. A false from fn stops the scan.
func scanEvents(r pebble.Reader, d0, d1 day, fn func(ev *ingest.Event) bool) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: dayPrefix(tabEvent, d0), UpperBound: dayPrefix(tabEvent, d1)})
	if err != nil {
		return fmt.Errorf("cannot read raw events: %w", err)
	}
	defer it.Close()
	var ev ingest.Event
	stop := errStopScan
	for it.First(); it.Valid(); it.Next() {
		err := forEachInBlock(it.Key(), it.Value(), &ev, func(ev *ingest.Event) error {
			if !fn(ev) {
				return stop
			}
			return nil
		})
		if err == stop {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return it.Error()
}

var errStopScan = fmt.Errorf("stop scan")
