package rollup

import (
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/waymark/waymark/ingest"
)

// Rebuild recomputes the hour and day rollups of the UTC days fromDay to
// toDay (inclusive) from the raw events, and moves the links' all-time
// totals by the difference. Events stored raw only (past the late window)
// stay out, as they were live. Each day is recomputed from a fresh state
// over the raw events of the day before to the day after, so a visit that
// crosses midnight counts once, in the hour it started. It holds the
// writer lock throughout: shipped batches wait. Re-running it is safe and
// gives byte-identical rows; a crash part way leaves some days rebuilt and
// some not, which running it again repairs.
func (a *Aggregator) Rebuild(fromDay, toDay time.Time) error {
	if err := a.enter(); err != nil {
		return err
	}
	defer a.leave()
	fd, td := dayOf(fromDay.UnixMilli()), dayOf(toDay.UnixMilli())
	if td < fd {
		return fmt.Errorf("cannot rebuild rollups: %s is after %s", fd, td)
	}
	a.mu.Lock()
	defer a.mu.Unlock()

	// allTime collects, per link, new minus old clicks and bot clicks of
	// the rebuilt days.
	allTime := make(map[string]*counters)
	if err := a.clearRollups(fd, td, allTime); err != nil {
		return err
	}
	for d := fd; d <= td; d++ {
		if err := a.rebuildDay(d, allTime); err != nil {
			return err
		}
		a.rm.rebuiltDays.Inc()
	}
	b := a.db.NewBatch()
	defer b.Close()
	dl := newDelta()
	for code, c := range allTime {
		dl.addAllTime(kindLink, code, fCount, c[fCount])
		dl.addAllTime(kindLink, code, fBots, c[fBots])
	}
	if err := dl.flush(a.db, b); err != nil {
		return err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("cannot commit rebuilt totals: %w", err)
	}
	a.log.Info("rebuilt rollups", "from", fd.String(), "to", td.String())
	return nil
}

// inDays reports whether an hour or day row's bucket lies in days fd..td.
func inDays(k *rkey, fd, td day) bool {
	return k.gran != granAll && k.bucket >= uint32(fd)*24 && k.bucket < uint32(td+1)*24
}

// clearRollups deletes the hour and day rows and sketches of days fd..td,
// taking the links' day totals off allTime.
func (a *Aggregator) clearRollups(fd, td day, allTime map[string]*counters) error {
	b := a.db.NewBatch()
	defer b.Close()
	for _, tab := range []byte{tabRollup, tabSketch} {
		it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tab}, UpperBound: []byte{tab + 1}})
		if err != nil {
			return fmt.Errorf("cannot read rollups: %w", err)
		}
		for it.First(); it.Valid(); it.Next() {
			k, ok := parseRKey(it.Key())
			if !ok || !inDays(&k, fd, td) {
				continue
			}
			if tab == tabRollup && k.kind == kindLink && k.dim == dimTotal && k.gran == granDay {
				var c counters
				if err := decodeCounters(it.Value(), &c); err != nil {
					it.Close()
					return err
				}
				at := allTimeOf(allTime, k.entity)
				at[fCount] -= c[fCount]
				at[fBots] -= c[fBots]
			}
			if err := b.Delete(it.Key(), nil); err != nil {
				it.Close()
				return fmt.Errorf("cannot stage rollup delete: %w", err)
			}
		}
		if err := it.Close(); err != nil {
			return fmt.Errorf("cannot read rollups: %w", err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("cannot clear rollups: %w", err)
	}
	return nil
}

func allTimeOf(m map[string]*counters, code string) *counters {
	c := m[code]
	if c == nil {
		c = new(counters)
		m[code] = c
	}
	return c
}

// rebuildDay folds the raw events of d-1..d+1 in time order and writes
// the rows and sketches of day d.
func (a *Aggregator) rebuildDay(d day, allTime map[string]*counters) error {
	lo := d
	if lo > 0 {
		lo--
	}
	late, err := a.lateIDs(lo, d+1)
	if err != nil {
		return err
	}
	f := newFolder(nil)
	it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: dayPrefix(tabEvent, lo), UpperBound: dayPrefix(tabEvent, d+2)})
	if err != nil {
		return fmt.Errorf("cannot read raw events: %w", err)
	}
	var ev ingest.Event
	for it.First(); it.Valid(); it.Next() {
		if err := ingest.DecodeEvent(it.Value(), &ev); err != nil {
			it.Close()
			return fmt.Errorf("cannot read raw event %x: %w", it.Key(), err)
		}
		if late[ev.ID] {
			continue
		}
		if err := f.fold(&ev); err != nil {
			it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("cannot read raw events: %w", err)
	}

	for k, c := range f.d.rows {
		if !inDays(&k, d, d) {
			delete(f.d.rows, k)
			continue
		}
		if k.kind == kindLink && k.dim == dimTotal && k.gran == granDay {
			at := allTimeOf(allTime, k.entity)
			at[fCount] += c[fCount]
			at[fBots] += c[fBots]
		}
	}
	for k := range f.d.sketches {
		if !inDays(&k, d, d) {
			delete(f.d.sketches, k)
		}
	}
	b := a.db.NewBatch()
	defer b.Close()
	if err := f.d.flush(a.db, b); err != nil {
		return err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("cannot commit rebuilt day %s: %w", d, err)
	}
	return nil
}

// lateIDs returns the ids of events of days lo..hi stored raw only.
func (a *Aggregator) lateIDs(lo, hi day) (map[[16]byte]bool, error) {
	out := make(map[[16]byte]bool)
	it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: dayPrefix(tabEventID, lo), UpperBound: dayPrefix(tabEventID, hi+1)})
	if err != nil {
		return nil, fmt.Errorf("cannot read event index: %w", err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		if v := it.Value(); len(v) == 9 && v[8] == lateFlag {
			var id [16]byte
			copy(id[:], it.Key()[5:])
			out[id] = true
		}
	}
	return out, it.Error()
}
