package rollup

import (
	"fmt"

	"github.com/VictoriaMetrics/metrics"
	"github.com/cockroachdb/pebble/v2"
)

// rollupMetrics are the waymark_rollup_* series of the rollup side.
type rollupMetrics struct {
	eventsLate    *metrics.Counter // stored raw only: past the late window
	clickLimits   *metrics.Counter // OnClickLimit calls
	visitorsSwept *metrics.Counter
	rebuiltDays   *metrics.Counter
}

func newRollupMetrics(s *metrics.Set) *rollupMetrics {
	const p = "waymark_rollup_"
	return &rollupMetrics{
		eventsLate:    s.GetOrCreateCounter(p + "events_late_total"),
		clickLimits:   s.GetOrCreateCounter(p + "click_limits_reached_total"),
		visitorsSwept: s.GetOrCreateCounter(p + "visitor_states_swept_total"),
		rebuiltDays:   s.GetOrCreateCounter(p + "rebuilt_days_total"),
	}
}

// checkClickLimits runs after a commit: for every link whose clicks moved,
// it compares the all-time exact non-bot count with the link's ClickLimit
// and reports a reached limit to OnClickLimit on a goroutine of its own,
// once per code and limit. It never blocks the apply on the callback.
func (a *Aggregator) checkClickLimits(d *delta) {
	if a.cfg.Links == nil || a.cfg.OnClickLimit == nil {
		return
	}
	var kb []byte
	for k := range d.rows {
		if k.kind != kindLink || k.gran != granAll {
			continue
		}
		l, ok := a.cfg.Links(k.entity)
		if !ok || l.ClickLimit <= 0 {
			continue
		}
		a.limitsMu.Lock()
		fired := a.limits[k.entity] == l.ClickLimit
		a.limitsMu.Unlock()
		if fired {
			continue
		}
		kb = appendRKey(kb[:0], tabRollup, &k)
		var c counters
		if err := readCounters(a.db, kb, &c); err != nil {
			a.log.Error("cannot read clicks for the click limit", "code", k.entity, "err", err)
			continue
		}
		if c[fCount] < l.ClickLimit {
			continue
		}
		a.limitsMu.Lock()
		a.limits[k.entity] = l.ClickLimit
		a.limitsMu.Unlock()
		a.rm.clickLimits.Inc()
		a.log.Info("click limit reached", "code", k.entity, "limit", l.ClickLimit, "clicks", c[fCount])
		go a.cfg.OnClickLimit(k.entity)
	}
}

// LinkClicks returns a link's exact all-time non-bot clicks (the number its
// click limit is checked against).
func (a *Aggregator) LinkClicks(code string) (int64, error) {
	if err := a.enter(); err != nil {
		return 0, err
	}
	defer a.leave()
	var c counters
	k := rkey{kindLink, code, dimTotal, granAll, 0, ""}
	if err := readCounters(a.db, appendRKey(nil, tabRollup, &k), &c); err != nil {
		return 0, err
	}
	return c[fCount], nil
}

// sweepVisitors deletes visitor states whose every visit ended before the
// late window (minus the visit gap): no event can join them any more.
// Visitors that come back are pruned as they are written; this catches the
// ones that never do.
func (a *Aggregator) sweepVisitors() error {
	if err := a.enter(); err != nil {
		return err
	}
	defer a.leave()
	a.mu.Lock()
	defer a.mu.Unlock()
	pruneBefore := a.cfg.Now().Add(-a.cfg.LateWindow).UnixMilli() - visitGapMS
	it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tabVisit}, UpperBound: []byte{tabVisit + 1}})
	if err != nil {
		return fmt.Errorf("cannot sweep visitor states: %w", err)
	}
	b := a.db.NewBatch()
	defer b.Close()
	n := 0
	for it.First(); it.Valid(); it.Next() {
		runs, err := decodeVisitorState(it.Value())
		stale := err != nil // unreadable: nothing can use it
		if err == nil {
			stale = true
			for _, r := range runs {
				stale = stale && r.end < pruneBefore
			}
		}
		if stale {
			if err := b.Delete(it.Key(), nil); err != nil {
				it.Close()
				return fmt.Errorf("cannot sweep visitor states: %w", err)
			}
			n++
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("cannot sweep visitor states: %w", err)
	}
	if n == 0 {
		return nil
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("cannot sweep visitor states: %w", err)
	}
	a.rm.visitorsSwept.Add(n)
	return nil
}
