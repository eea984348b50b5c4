package rollup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Month rows are written when a month is over, not by every batch: a batch
// then writes two tiers instead of three (a third fewer keys), and a query
// reads the current month from its day rows, which exist anyway. Sealing
// a month sums its day rows into month rows and unions its day sketches
// into month sketches, once, under the writer lock; from then on a late
// event of that month writes its month operands with the other tiers. The
// first month not yet sealed is kept in sealedKey (and a.sealed).
var sealedKey = []byte("!sealed")

// loadSealed reads the first unsealed month; a new database starts with
// the current month (nothing older exists).
func (a *Aggregator) loadSealed(now time.Time) error {
	v, closer, err := a.db.Get(sealedKey)
	if errors.Is(err, pebble.ErrNotFound) {
		m := monthOfDay(dayOf(now.UnixMilli()))
		a.sealed.Store(m)
		return a.db.Set(sealedKey, binary.BigEndian.AppendUint32(nil, m), pebble.Sync)
	}
	if err != nil {
		return fmt.Errorf("cannot read sealed month: %w", err)
	}
	defer closer.Close()
	if len(v) != 4 {
		return fmt.Errorf("cannot read sealed month: %d bytes", len(v))
	}
	a.sealed.Store(binary.BigEndian.Uint32(v))
	return nil
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
	b := a.db.NewBatch()
	defer b.Close()
	d0, d1 := uint32(monthStart(m)), uint32(monthStart(m+1))
	for _, tab := range []byte{tabRows, tabSketch} {
		lo, hi := tierRange(tab, granDay, d0, d1)
		it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return fmt.Errorf("cannot read day rows: %w", err)
		}
		var kb []byte
		for it.First(); it.Valid(); it.Next() {
			k := it.Key()
			if len(k) < 6 {
				continue
			}
			// The same key with the month's period: Pebble's merger sums
			// the rowsets and unions the sketches of the month's days.
			kb = append(append(kb[:0], tab, granMonth), binary.BigEndian.AppendUint32(nil, m)...)
			kb = append(kb, k[6:]...)
			v, err := it.ValueAndErr()
			if err == nil {
				err = b.Merge(kb, v, nil)
			}
			if err != nil {
				it.Close()
				return fmt.Errorf("cannot stage month row: %w", err)
			}
		}
		if err := it.Close(); err != nil {
			return fmt.Errorf("cannot read day rows: %w", err)
		}
	}
	if err := b.Set(sealedKey, binary.BigEndian.AppendUint32(nil, m+1), nil); err != nil {
		return fmt.Errorf("cannot stage sealed month: %w", err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("cannot seal month: %w", err)
	}
	a.sealed.Store(m + 1)
	return nil
}

// monthSealed reports whether month m's rows exist.
func (a *Aggregator) monthSealed(m uint32) bool { return m < a.sealed.Load() }
