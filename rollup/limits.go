package rollup

import (
	"errors"
	"fmt"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/cockroachdb/pebble/v2"
)

// rollupMetrics are the waymark_rollup_* series of the rollup side.
type rollupMetrics struct {
	eventsLate      *metrics.Counter // older than the late window on arrival (folded all the same)
	clickLimits     *metrics.Counter // OnClickLimit calls
	visitorsEvicted *metrics.Counter
	rebuiltDays     *metrics.Counter
	sealed          *metrics.Counter // days whose day rows were written
}

func newRollupMetrics(s *metrics.Set) *rollupMetrics {
	const p = "waymark_rollup_"
	return &rollupMetrics{
		eventsLate:      s.GetOrCreateCounter(p + "events_late_total"),
		clickLimits:     s.GetOrCreateCounter(p + "click_limits_reached_total"),
		visitorsEvicted: s.GetOrCreateCounter(p + `visitors_evicted_total{reason="capacity"}`),
		rebuiltDays:     s.GetOrCreateCounter(p + "rebuilt_days_total"),
		sealed:          s.GetOrCreateCounter(p + "sealed_days_total"),
	}
}

// checkClickLimits runs after every apply with the pending aggregation's
// delta d: for every link the apply clicked, it
// compares the all-time exact non-bot count (the stored row plus d's, which
// no stored row holds yet) with the link's ClickLimit and reports a reached
// limit to OnClickLimit on a goroutine of its own, once per code and
// limit. It never blocks the apply on the callback.
func (a *Aggregator) checkClickLimits(d *delta) {
	clicked := d.clicked
	d.clicked = d.clicked[:0]
	if a.cfg.Links == nil || a.cfg.OnClickLimit == nil {
		return
	}
	// Only the links this apply clicked: the pending delta holds every
	// link since the checkpoint, and walking all of them per batch was
	// work that grew with the checkpoint interval.
	seen := make(map[uint32]struct{}, len(clicked))
	for _, ent := range clicked {
		if _, dup := seen[ent]; dup {
			continue
		}
		seen[ent] = struct{}{}
		c := d.allTime[ent]
		if c == nil || c[fCount] == 0 {
			continue
		}
		e := d.ents.strs[ent]
		if len(e) < 2 || e[0] != kindLink {
			continue
		}
		code := e[2:]
		limit := a.clickLimitOf(code)
		if limit <= 0 {
			continue
		}
		a.limitsMu.Lock()
		fired := a.limits[code] == limit
		a.limitsMu.Unlock()
		if fired {
			continue
		}
		stored, err := a.linkClicks(code)
		if err != nil {
			a.log.Error("cannot read clicks for the click limit", "code", code, "err", err)
			continue
		}
		clicks := stored + c[fCount]
		if clicks < limit {
			continue
		}
		a.limitsMu.Lock()
		a.limits[code] = limit
		a.limitsMu.Unlock()
		a.rm.clickLimits.Inc()
		a.log.Info("click limit reached", "code", code, "limit", limit, "clicks", clicks)
		go a.cfg.OnClickLimit(code)
	}
}

// LinkClicks returns a link's exact all-time non-bot clicks (the number its
// click limit is checked against).
func (a *Aggregator) LinkClicks(code string) (int64, error) {
	if err := a.enter(); err != nil {
		return 0, err
	}
	defer a.leave()
	return a.linkClicks(code)
}

func (a *Aggregator) linkClicks(code string) (int64, error) {
	var out int64
	key := rowPrefix(nil, tabRows, granAll, 0, kindLink, code, "")
	v, closer, err := a.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("cannot read all-time clicks: %w", err)
	}
	defer closer.Close()
	err = forEachRow(v, func(comp []byte, c *counters) error {
		if string(comp) == dimCode(dimTotal) {
			out += c[fCount]
		}
		return nil
	})
	return out, err
}

// limitTTL is how long a link's click limit is taken from the cache: a
// batch touches thousands of links, and reading each one's record after
// every commit was a tenth of a busy node's CPU. A limit set on a link is
// seen within limitTTL.
const limitTTL = 10 * time.Second

// maxCachedLimits bounds the cache; past it, it starts again empty.
const maxCachedLimits = 1 << 20

type cachedLimit struct {
	limit int64
	until time.Time
}

// clickLimitOf returns a link's click limit (0: none), from the cache
// when it is fresh. Only apply calls it, under a.mu.
func (a *Aggregator) clickLimitOf(code string) int64 {
	now := a.cfg.Now()
	if c, ok := a.limitCache[code]; ok && now.Before(c.until) {
		return c.limit
	}
	var limit int64
	if l, ok := a.cfg.Links(code); ok {
		limit = l.ClickLimit
	}
	if len(a.limitCache) >= maxCachedLimits {
		clear(a.limitCache)
	}
	a.limitCache[code] = cachedLimit{limit, now.Add(limitTTL)}
	return limit
}
