package rollup

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
)

// Drop tallies (ingest.DropTally) come in segments beside the events and
// say how many events of a link or site an edge dropped before writing
// them. They are stored with their segment, in its synced batch, so each
// counts exactly once; the stats answers carry the sum over their range
// as dropped_events, so a dashboard never shows a silent undercount. They
// are not events: no raw block, no rollup, no rebuild touches them.
// Tallies nobody could attribute (ingest.ScopeUnknown) are kept under
// the empty name and answered by no scope; the edges' metrics count them.

// appendDroppedKey is X day(4) scope(1) len(1) name hour-of-day(1): one
// UTC day's tallies of one scope are contiguous, in hour order.
func appendDroppedKey(dst []byte, d day, scope ingest.Scope, name string) []byte {
	dst = append(dst, tabDropped)
	dst = binary.BigEndian.AppendUint32(dst, uint32(d))
	dst = append(dst, byte(scope), byte(len(name)))
	return append(dst, name...)
}

// stageTallies adds a fresh segment's tallies to the X counters. Tallies
// past retention or from the future are left out, as their events would
// be.
func stageTallies(b *pebble.Batch, tallies []ingest.DropTally, cutoff day, maxMS int64, kb, vb *[]byte) error {
	for i := range tallies {
		t := &tallies[i]
		ms := t.Hour * msPerHour
		d := dayOf(ms)
		if d < cutoff || ms > maxMS {
			continue
		}
		*kb = appendDroppedKey((*kb)[:0], d, t.Scope, t.Name)
		*kb = append(*kb, byte(t.Hour%24))
		if err := mergeCount(b, *kb, int64(t.Count), vb); err != nil {
			return fmt.Errorf("cannot stage drop tally: %w", err)
		}
	}
	return nil
}

// DroppedEvents is the number of events of one link or site (by scope)
// that the edges dropped unwritten in the UTC hours r touches.
func (a *Aggregator) DroppedEvents(scope ingest.Scope, name string, r query.Range) (int64, error) {
	if err := a.enter(); err != nil {
		return 0, err
	}
	defer a.leave()
	return a.droppedIn(scope, name, r)
}

// droppedIn sums the tallies of one link or site over the UTC hours that
// r touches. Callers hold the life lock (enter).
func (a *Aggregator) droppedIn(scope ingest.Scope, name string, r query.Range) (int64, error) {
	h0, h1 := hoursOf(r)
	if h1 <= h0 {
		return 0, nil
	}
	d0, d1 := day(h0/24), day((h1-1)/24)
	var lo, hi []byte
	var total int64
	it, err := a.db.NewIter(nil)
	if err != nil {
		return 0, fmt.Errorf("cannot read drop tallies: %w", err)
	}
	for d := d0; d <= d1; d++ {
		lo = appendDroppedKey(lo[:0], d, scope, name)
		first, last := uint32(d)*24, uint32(d)*24+23
		lo = append(lo, byte(max(h0, first)-first))
		hi = appendDroppedKey(hi[:0], d, scope, name)
		hi = append(hi, byte(min(h1-1, last)-first)+1)
		for it.SeekGE(lo); it.Valid() && string(it.Key()) < string(hi); it.Next() {
			v, err := it.ValueAndErr()
			if err != nil {
				it.Close()
				return 0, fmt.Errorf("cannot read drop tally: %w", err)
			}
			var c counters
			if err := decodeCounters(v, &c); err != nil {
				it.Close()
				return 0, fmt.Errorf("cannot read drop tally: %w", err)
			}
			total += c[0]
		}
	}
	if err := it.Close(); err != nil {
		return 0, fmt.Errorf("cannot read drop tallies: %w", err)
	}
	return total, nil
}
