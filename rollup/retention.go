package rollup

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// ApplyRetention drops what has outlived its tier, every table partitioned
// by time so each drop is a range deletion:
//
//   - raw days older than Retention: their blocks and per-day counters,
//     taken off the totals in the same batch, one batch per day, and the
//     records of segments received on those days;
//   - hour rows (and crossing rows) older than HourRetention, day rows
//     older than DayRetention; month rows are kept;
//   - visitor states of hash days older than visitorDays, and, once a day,
//     whatever in the others links a visitor's hashes of two days whose
//     older salt is gone (scrubLinks).
func (a *Aggregator) ApplyRetention() error {
	if err := a.enterWriter(); err != nil {
		return err
	}
	defer a.leave()
	start := time.Now()
	now := a.cfg.Now()
	cutoff := a.cutoffDay(now)

	a.mu.Lock()
	defer a.mu.Unlock()
	// Retention deletes rows and blocks the pending aggregation would
	// write to or the journal names.
	if err := a.checkpoint(); err != nil {
		a.m.retentionFailed.Inc()
		return err
	}
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
	if err := a.dropTiers(now); err != nil {
		a.m.retentionFailed.Inc()
		return err
	}
	if err := a.scrubLinks(now); err != nil {
		a.m.retentionFailed.Inc()
		return err
	}
	if err := a.seal(now); err != nil {
		a.m.retentionFailed.Inc()
		return err
	}
	a.updateGauges()
	a.m.retentionSeconds.UpdateDuration(start)
	return nil
}

// dropDay deletes one raw day and takes its counters off the totals.
func (a *Aggregator) dropDay(d day) error {
	b := a.db.NewBatch()
	defer b.Close()
	prefix := dayPrefix(tabDayCounter, d)
	it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return fmt.Errorf("cannot read counters of %s: %w", d, err)
	}
	var kb, vb []byte
	var c counters
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) < len(prefix)+1 {
			it.Close()
			return fmt.Errorf("cannot read counters of %s: bad counter %x", d, k)
		}
		if err := decodeCounters(it.Value(), &c); err != nil {
			it.Close()
			return fmt.Errorf("cannot read counters of %s: %w", d, err)
		}
		kb = append(append(kb[:0], tabTotal), k[len(prefix):]...)
		if err := mergeCount(b, kb, -c[0], &vb); err != nil {
			it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("cannot read counters of %s: %w", d, err)
	}
	for _, tab := range []byte{tabEvent, tabDayCounter, tabDropped} {
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

// tierRange is the key range of one rollup tier's periods [lo, hi).
func tierRange(tab, gran byte, lo, hi uint32) ([]byte, []byte) {
	k0 := binary.BigEndian.AppendUint32([]byte{tab, gran}, lo)
	k1 := binary.BigEndian.AppendUint32([]byte{tab, gran}, hi)
	return k0, k1
}

// dropTiers deletes hour, crossing and day rows past their retention and
// the visitor states of hash days older than visitorDays.
func (a *Aggregator) dropTiers(now time.Time) error {
	hcut, dcut := a.tierCutoffs(now)
	b := a.db.NewBatch()
	defer b.Close()
	for _, tab := range []byte{tabRows, tabSketch} {
		for _, g := range []struct {
			gran byte
			hi   uint32
		}{{granHour, hcut}, {granCross, hcut}, {granDay, uint32(dcut)}} {
			lo, hi := tierRange(tab, g.gran, 0, g.hi)
			if err := b.DeleteRange(lo, hi, nil); err != nil {
				return fmt.Errorf("cannot stage tier retention: %w", err)
			}
		}
	}
	vcut := uint32(dayOf(now.UnixMilli()))
	vcut -= min(vcut, visitorDays-1)
	if err := b.DeleteRange(dayPrefix(tabVisit, 0), dayPrefix(tabVisit, day(vcut)), nil); err != nil {
		return fmt.Errorf("cannot stage visitor retention: %w", err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("cannot apply tier retention: %w", err)
	}
	a.visitors.dropDaysBefore(vcut)
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
