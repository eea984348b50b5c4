package rollup

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/waymark/waymark/ingest"
)

// ErrRebuildRange is returned for a rebuild that would reach days whose raw
// events are no longer held: their rollups are all that is left of them.
var ErrRebuildRange = errors.New("cannot rebuild rollups past raw retention")

// Rebuild recomputes the rollups of the UTC days fromDay to toDay
// (inclusive) from the raw events. Each day is one atomic batch: its hour,
// crossing and day rows are replaced, and its month row and the links'
// all-time rows move by new minus old, so a crash leaves every day either
// rebuilt or as it was, and re-running gives the same rows. A day is
// folded over fresh visits from the raw events of the day before to the
// day after, so visits across midnight come out whole.
//
// Ingest keeps flowing: a day is computed from a snapshot without the
// writer lock, which is taken only to write it. If a batch wrote events of
// those three days in the meantime (today, typically), the day is computed
// again under the lock. Days older than raw retention are refused.
func (a *Aggregator) Rebuild(fromDay, toDay time.Time) error {
	if err := a.enterWriter(); err != nil {
		return err
	}
	defer a.leave()
	fd, td := dayOf(fromDay.UnixMilli()), dayOf(toDay.UnixMilli())
	if td < fd {
		return fmt.Errorf("cannot rebuild rollups: %s is after %s", fd, td)
	}
	if cut := a.cutoffDay(a.cfg.Now()); fd < cut {
		return fmt.Errorf("%w: %s is before %s, the oldest raw day held", ErrRebuildRange, fd, cut)
	}
	for d := fd; d <= td; d++ {
		if err := a.rebuildDay(d); err != nil {
			return err
		}
		a.rm.rebuiltDays.Inc()
		a.log.Info("rebuilt rollups of a day", "day", d.String())
	}
	return nil
}

// rebuildDay recomputes one day, optimistically outside the writer lock.
func (a *Aggregator) rebuildDay(d day) error {
	a.mu.Lock()
	// The day's rows are replaced from the raw blocks: pending rollups of
	// those blocks go in first, or the replacement would count them twice.
	if err := a.checkpoint(); err != nil {
		a.mu.Unlock()
		return err
	}
	gen := a.dayGen(d)
	snap := a.db.NewSnapshot()
	a.mu.Unlock()
	f, err := a.foldDay(snap, d)
	snap.Close()
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.checkpoint(); err != nil {
		return err
	}
	if a.dayGen(d) != gen {
		if f, err = a.foldDay(a.db, d); err != nil {
			return err
		}
	}
	return a.writeDay(d, f)
}

// dayGen sums the apply generations of the days a rebuild of d reads.
// Callers hold mu.
func (a *Aggregator) dayGen(d day) uint64 {
	return a.gens[d-1] + a.gens[d] + a.gens[d+1]
}

// foldDay folds the raw events of d-1..d+1 into fresh visits, closes them
// all, and keeps only what lands in day d.
func (a *Aggregator) foldDay(r pebble.Reader, d day) (*folder, error) {
	lo := d
	if lo > 0 {
		lo--
	}
	f := newFolder(newFreshStates())
	if err := foldWindow(r, f, int64(lo)*msPerDay, int64(d+2)*msPerDay); err != nil {
		return nil, err
	}
	src := f.src.(*freshStates)
	for k, st := range src.m {
		ent := f.d.ent(kindSite, src.sites.names[k.site])
		for i := range st.runs {
			f.closeRun(ent, &st.runs[i])
		}
	}
	f.d.keepHours(uint32(d)*24, uint32(d+1)*24)
	return f, nil
}

// writeDay replaces day d's rows with f's in one batch. Callers hold mu.
func (a *Aggregator) writeDay(d day, f *folder) error {
	b := a.db.NewBatch()
	defer b.Close()
	h0, h1 := uint32(d)*24, uint32(d+1)*24
	month := monthOfDay(d)
	// The old day rows come off the month rows and the links' all-time
	// rows before the day is deleted; the new ones go on with the flush.
	if err := a.retractDayRows(b, d, month, a.monthSealed(month)); err != nil {
		return err
	}
	for _, tab := range []byte{tabRows, tabSketch} {
		for _, g := range []struct {
			gran   byte
			lo, hi uint32
		}{{granHour, h0, h1}, {granCross, h0, h1}, {granDay, uint32(d), uint32(d) + 1}} {
			lo, hi := tierRange(tab, g.gran, g.lo, g.hi)
			if err := b.DeleteRange(lo, hi, nil); err != nil {
				return fmt.Errorf("cannot stage rebuild of %s: %w", d, err)
			}
		}
	}
	sealed, daySealed := a.monthSealed(month), a.daySealed(uint32(d))
	keep := func(gran byte, _ uint32) bool {
		return (gran != granMonth || sealed) && (gran != granDay || daySealed)
	}
	if err := f.d.flush(b, keep, a.sketches.touch); err != nil {
		a.sketches.discard()
		return err
	}
	err := a.sketches.commit(func() error { return b.Commit(pebble.Sync) })
	if err != nil {
		a.sketches.discard()
		return fmt.Errorf("cannot commit rebuilt day %s: %w", d, err)
	}
	// The day's deleted rows and the month and all-time rows it moved are
	// keys flush never touched: no cached copy may outlive them.
	a.sketches.forgetAll()
	return nil
}

// retractDayRows stages, for every day row of d, its negation into the
// month row of the same entity and dimension, and for links' totals into
// their all-time rows.
// A day not sealed yet has no day rows: its hour rows are read instead
// (there is no month row to move then either).
func (a *Aggregator) retractDayRows(b *pebble.Batch, d day, month uint32, sealed bool) error {
	lo, hi := tierRange(tabRows, granDay, uint32(d), uint32(d)+1)
	if !a.daySealed(uint32(d)) {
		lo, hi = tierRange(tabRows, granHour, uint32(d)*24, uint32(d+1)*24)
	}
	it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("cannot read day rows of %s: %w", d, err)
	}
	defer it.Close()
	var kb, vb []byte
	var entries []rowEntry
	total := dimCode(dimTotal)
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		rest := k[6:] // kind len entity
		entries = entries[:0]
		var totals []rowEntry
		err := forEachRow(it.Value(), func(comp []byte, c *counters) error {
			var neg counters
			for i, x := range c {
				neg[i] = -x
			}
			e := rowEntry{value: append([]byte(nil), comp...), c: neg}
			entries = append(entries, e)
			if string(comp) == total {
				totals = append(totals, e)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("cannot read day row %x: %w", k, err)
		}
		vb = appendRowset(vb[:0], entries)
		if sealed {
			kb = rowPrefix(kb[:0], tabRows, granMonth, month, 0, "", "")[:6]
			kb = append(kb, rest...)
			if err := b.Merge(kb, vb, nil); err != nil {
				return fmt.Errorf("cannot stage month row: %w", err)
			}
		}
		if len(rest) >= 1 && rest[0] == kindLink && len(totals) > 0 {
			kb = rowPrefix(kb[:0], tabRows, granAll, 0, 0, "", "")[:6]
			kb = append(kb, rest...)
			if err := b.Merge(kb, appendRowset(nil, totals), nil); err != nil {
				return fmt.Errorf("cannot stage all-time row: %w", err)
			}
		}
	}
	return it.Error()
}

// foldWindow folds the stored events of [from, to) into f. Visits do not
// depend on the order of their events, except that an engagement joins
// only a visit that is there (and keeps it alive for the next one): the
// other events are folded first, in the stored order, then the
// engagements in time order, which is what arriving in time order gives.
func foldWindow(r pebble.Reader, f *folder, from, to int64) error {
	var engagements []ingest.Event
	var ferr error
	err := scanEvents(r, dayOf(from), dayOf(to-1)+1, func(ev *ingest.Event) bool {
		switch {
		case ev.Time < from || ev.Time >= to:
		case ev.Kind == ingest.KindEngagement:
			e := *ev
			e.Props = nil
			engagements = append(engagements, e)
		default:
			_, ferr = f.fold(ev)
		}
		return ferr == nil
	})
	if err == nil {
		err = ferr
	}
	if err != nil {
		return err
	}
	slices.SortFunc(engagements, func(a, b ingest.Event) int { return cmp.Compare(a.Time, b.Time) })
	for i := range engagements {
		if _, err := f.fold(&engagements[i]); err != nil {
			return err
		}
	}
	return nil
}
