package rollup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Day and month rows are written when the day or month is over, not by
// every batch: a batch then writes one tier (its hours) instead of three,
// and a query reads the current day from its hour rows and the current
// month from its day rows, which exist anyway. Sealing a day sums its hour
// rows into day rows and unions its hour sketches into day sketches, once,
// under the writer lock (a month likewise from its days); from then on a
// late event of that day writes its day operands with the hours. The first
// day and month not yet sealed are kept in sealedDayKey and sealedKey (and
// a.sealedDay, a.sealed).
var (
	sealedKey    = []byte("!sealed")
	sealedDayKey = []byte("!sealedday")
)

// loadSealed reads the first unsealed day and month; a new database starts
// with the current ones (nothing older exists).
func (a *Aggregator) loadSealed(now time.Time) error {
	today := uint32(dayOf(now.UnixMilli()))
	for _, t := range []struct {
		key []byte
		to  *atomic.Uint32
		new uint32
	}{{sealedKey, &a.sealed, monthOfDay(day(today))}, {sealedDayKey, &a.sealedDay, today}} {
		v, closer, err := a.db.Get(t.key)
		if errors.Is(err, pebble.ErrNotFound) {
			t.to.Store(t.new)
			if err := a.db.Set(t.key, binary.BigEndian.AppendUint32(nil, t.new), pebble.Sync); err != nil {
				return fmt.Errorf("cannot record sealed periods: %w", err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("cannot read sealed periods: %w", err)
		}
		if len(v) != 4 {
			closer.Close()
			return fmt.Errorf("cannot read sealed periods: %d bytes", len(v))
		}
		t.to.Store(binary.BigEndian.Uint32(v))
		closer.Close()
	}
	return nil
}

// seal seals every finished day, then every finished month. Callers hold
// mu.
func (a *Aggregator) seal(now time.Time) error {
	today := uint32(dayOf(now.UnixMilli()))
	for d := a.sealedDay.Load(); d < today; d++ {
		if err := a.sealInto(granHour, d*24, d*24+24, granDay, d, sealedDayKey); err != nil {
			return err
		}
		a.sealedDay.Store(d + 1)
		a.rm.sealed.Inc()
	}
	return a.sealMonths(now)
}

// sealMonths seals every month before now's. Callers hold mu.
func (a *Aggregator) sealMonths(now time.Time) error {
	cur := monthOfDay(dayOf(now.UnixMilli()))
	for m := a.sealed.Load(); m < cur; m++ {
		start := time.Now()
		if err := a.sealMonth(m); err != nil {
			return err
		}
		a.log.Info("sealed month rollups", "month", monthStart(m).String()[:7], "took", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// sealMonth writes month m's rows and sketches from its day rows, and
// records it sealed, in one batch.
func (a *Aggregator) sealMonth(m uint32) error {
	if err := a.sealInto(granDay, uint32(monthStart(m)), uint32(monthStart(m+1)), granMonth, m, sealedKey); err != nil {
		return err
	}
	a.sealed.Store(m + 1)
	return nil
}

// sealInto merges the rows and sketches of periods [lo, hi) of gran src
// into period p of gran dst, and records p+1 under marker, in one batch.
func (a *Aggregator) sealInto(src byte, lo, hi uint32, dst byte, p uint32, marker []byte) error {
	b := a.db.NewBatch()
	defer b.Close()
	for _, tab := range []byte{tabRows, tabSketch} {
		lo, hi := tierRange(tab, src, lo, hi)
		it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return fmt.Errorf("cannot read rollups: %w", err)
		}
		var kb []byte
		for it.First(); it.Valid(); it.Next() {
			k := it.Key()
			if len(k) < 6 {
				continue
			}
			// The same key with the coarser period: Pebble's merger sums
			// the rowsets and unions the sketches of its parts.
			kb = append(append(kb[:0], tab, dst), binary.BigEndian.AppendUint32(nil, p)...)
			kb = append(kb, k[6:]...)
			v, err := it.ValueAndErr()
			if err == nil {
				err = b.Merge(kb, v, nil)
			}
			if err != nil {
				it.Close()
				return fmt.Errorf("cannot stage sealed rollups: %w", err)
			}
		}
		if err := it.Close(); err != nil {
			return fmt.Errorf("cannot read rollups: %w", err)
		}
	}
	if err := b.Set(marker, binary.BigEndian.AppendUint32(nil, p+1), nil); err != nil {
		return fmt.Errorf("cannot stage sealed period: %w", err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("cannot seal rollups: %w", err)
	}
	return nil
}

// monthSealed reports whether month m's rows exist.
func (a *Aggregator) monthSealed(m uint32) bool { return m < a.sealed.Load() }

// daySealed reports whether day d's rows exist.
func (a *Aggregator) daySealed(d uint32) bool { return d < a.sealedDay.Load() }
