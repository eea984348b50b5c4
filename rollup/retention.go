package rollup

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// ApplyRetention drops every whole day older than Retention: its events,
// its dedup index and its per-day counters, subtracting those counters from
// the totals in the same atomic batch, one batch per day. Segment records
// received on those days go too: a segment sent again after that finds its
// events either still held (the dedup index catches them) or on a dropped
// day (they are too old to store), so it is still counted once.
func (a *Aggregator) ApplyRetention() error {
	if err := a.enter(); err != nil {
		return err
	}
	defer a.leave()
	start := time.Now()
	cutoff := a.cutoffDay(a.cfg.Now())

	a.mu.Lock()
	defer a.mu.Unlock()
	var old []day
	for d := range a.days {
		if d < cutoff {
			old = append(old, d)
		}
	}
	slices.Sort(old)
	for _, d := range old {
		if err := a.dropDay(d); err != nil {
			a.m.retentionFailed.Inc()
			return err
		}
		a.log.Info("dropped raw day", "day", d.String(), "events", a.days[d].events)
		delete(a.days, d)
		a.m.daysDropped.Inc()
	}
	if err := a.dropSegmentRecords(cutoff); err != nil {
		a.m.retentionFailed.Inc()
		return err
	}
	a.updateGauges()
	a.m.retentionSeconds.UpdateDuration(start)
	return nil
}

// dropDay deletes one day and takes its counters off the totals.
func (a *Aggregator) dropDay(d day) error {
	b := a.db.NewBatch()
	defer b.Close()
	prefix := dayPrefix(tabDayCounter, d)
	it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return fmt.Errorf("cannot read counters of %s: %w", d, err)
	}
	var kb []byte
	var vb [8]byte
	for it.First(); it.Valid(); it.Next() {
		k, v := it.Key(), it.Value()
		if len(k) < len(prefix)+1 || len(v) != 8 {
			it.Close()
			return fmt.Errorf("cannot read counters of %s: bad counter %x", d, k)
		}
		n := binary.BigEndian.Uint64(v)
		kb = append(append(kb[:0], tabTotal), k[len(prefix):]...)
		total, err := getUint64(a.db, kb)
		if err != nil {
			it.Close()
			return err
		}
		if n > total {
			// Totals are the sum of held days; this cannot happen unless
			// the database was damaged. Clamp rather than wrap around.
			a.log.Error("total counter below a day's count", "key", fmt.Sprintf("%x", kb), "total", total, "day_count", n)
			n = total
		}
		if total == n {
			err = b.Delete(kb, nil)
		} else {
			binary.BigEndian.PutUint64(vb[:], total-n)
			err = b.Set(kb, vb[:], nil)
		}
		if err != nil {
			it.Close()
			return fmt.Errorf("cannot stage total counter: %w", err)
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("cannot read counters of %s: %w", d, err)
	}
	for _, tab := range []byte{tabEvent, tabEventID, tabDayCounter} {
		if err := b.DeleteRange(dayPrefix(tab, d), dayPrefix(tab, d+1), nil); err != nil {
			return fmt.Errorf("cannot stage drop of %s: %w", d, err)
		}
	}
	if err := b.Delete(dayKey(d), nil); err != nil {
		return fmt.Errorf("cannot stage drop of %s: %w", d, err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("cannot drop %s: %w", d, err)
	}
	return nil
}

// dropSegmentRecords deletes the records of segments received before the
// cutoff day, in chunks so one batch stays small.
func (a *Aggregator) dropSegmentRecords(cutoff day) error {
	lower, upper := []byte{tabSegmentDay}, dayPrefix(tabSegmentDay, cutoff)
	for {
		next, more, err := a.dropSegmentChunk(lower, upper, 10000)
		if err != nil {
			return fmt.Errorf("cannot drop old segment records: %w", err)
		}
		if !more {
			return nil
		}
		lower = next
	}
}

// dropSegmentChunk deletes up to limit G keys in [lower, upper) and their
// S records. It returns where the next chunk starts and whether there may
// be one.
func (a *Aggregator) dropSegmentChunk(lower, upper []byte, limit int) (next []byte, more bool, err error) {
	it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, false, err
	}
	b := a.db.NewBatch()
	defer b.Close()
	var last []byte
	n := 0
	for it.First(); it.Valid() && n < limit && err == nil; it.Next() {
		k := it.Key()
		if len(k) > 5 { // G day(4) id: the S key is S id
			err = b.Delete(append([]byte{tabSegment}, k[5:]...), nil)
		}
		last = append(last[:0], k...)
		n++
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil || n == 0 {
		return nil, false, err
	}
	next = append(last, 0) // the smallest key after the last one handled
	if err := b.DeleteRange(lower, next, nil); err != nil {
		return nil, false, err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return nil, false, err
	}
	return next, n == limit, nil
}
