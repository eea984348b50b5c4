package node

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/waymark/waymark/rollup/clickhouse"
	"github.com/waymark/waymark/store"
)

// Click limits on a ClickHouse aggregator, as the embedded aggregator
// checks them after each apply (rollup/limits.go): the links clicked in
// the segments this aggregator stored since the last check, whose local
// record has a click_limit and is still active, get their all-time
// non-bot clicks from ClickHouse (held events plus retired_clicks,
// Backend.AllTimeClicks); one that reached its limit is taken out of
// service through Raft (onClickLimit), once per code and limit (again
// only if the link is still active chLimitRefire later). Every
// aggregator checks the links of the segments it stored, so with several
// any of them may be the one; onClickLimit applies only to a link still
// active (OnlyFrom), so two reporting the same link change it once. The
// check runs after every stored segment with clicks, at most every
// chLimitMinGap, and on a timer; the work is bounded by the codes seen.
// The codes waiting are in memory only: a crash between a store and its
// check leaves those links unchecked until their next stored click, which
// checks them again (such a link goes out of service one click late).

const (
	chLimitTick   = time.Second
	chLimitMinGap = 200 * time.Millisecond
	// chLimitMaxPending bounds the codes waiting for a check; past it a
	// code is dropped (counted) and checked again at its next click.
	chLimitMaxPending = 1 << 20
	// chLimitMaxFired bounds the memory of limits reported; past it, it
	// starts again empty (a second report is a no-op through Raft).
	chLimitMaxFired = 1 << 20
)

// chLimitRefire is how long a reported limit is not reported again
// while the local replica still shows the link active (the Raft change
// on its way); past it, a link still active (the change failed) is
// reported again at its next click.
const chLimitRefire = 10 * time.Second

type firedLimit struct {
	limit int64
	at    time.Time
}

// chLimits is the click-limit check of a ClickHouse aggregator.
type chLimits struct {
	mu      sync.Mutex
	pending map[string]struct{}
	wake    chan struct{}

	fired map[string]firedLimit // code -> the limit reported (the loop's own)

	reached, failed, dropped *metrics.Counter
}

func newCHLimits(s *metrics.Set) *chLimits {
	const p = "waymark_clickhouse_"
	l := &chLimits{
		pending: make(map[string]struct{}),
		wake:    make(chan struct{}, 1),
		fired:   make(map[string]firedLimit),
		reached: s.GetOrCreateCounter(p + "click_limits_reached_total"),
		failed:  s.GetOrCreateCounter(p + "click_limit_checks_failed_total"),
		dropped: s.GetOrCreateCounter(p + "click_limit_codes_dropped_total"),
	}
	s.GetOrCreateGauge(p+"click_limit_pending_codes", func() float64 {
		l.mu.Lock()
		defer l.mu.Unlock()
		return float64(len(l.pending))
	})
	return l
}

// note queues codes (non-bot clicks just stored) for the next check.
func (l *chLimits) note(codes []string) {
	if len(codes) == 0 {
		return
	}
	l.mu.Lock()
	for _, c := range codes {
		if _, ok := l.pending[c]; !ok {
			if len(l.pending) >= chLimitMaxPending {
				l.dropped.Inc()
				continue
			}
			l.pending[c] = struct{}{}
		}
	}
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *chLimits) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.pending) == 0 {
		return nil
	}
	out := make([]string, 0, len(l.pending))
	for c := range l.pending {
		out = append(out, c)
	}
	clear(l.pending)
	return out
}

// loop checks until ctx ends.
func (ch *chAggregator) limitLoop(ctx context.Context) {
	t := time.NewTicker(chLimitTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-ch.limits.wake:
		}
		ch.checkClickLimits(ctx)
		if sleepCtx(ctx, chLimitMinGap) != nil {
			return
		}
	}
}

// checkClickLimits checks the pending codes once; codes whose count
// could not be read wait for the next check.
func (ch *chAggregator) checkClickLimits(ctx context.Context) {
	l, n := ch.limits, ch.n
	codes := l.take()
	if len(codes) == 0 {
		return
	}
	limits := make(map[string]int64)
	var ask []string
	for _, code := range codes {
		var link store.Link
		found, err := n.store.GetLink([]byte(code), &link)
		if err != nil {
			n.log.Warn("cannot read a link for its click limit", "code", code, "err", err)
			l.note([]string{code})
			continue
		}
		if !found || link.ClickLimit <= 0 || link.Status != store.StatusActive {
			continue
		}
		if f, ok := l.fired[code]; ok && f.limit == link.ClickLimit && time.Since(f.at) < chLimitRefire {
			continue
		}
		limits[code] = link.ClickLimit
		ask = append(ask, code)
	}
	for len(ask) > 0 && ctx.Err() == nil {
		batch := ask[:min(len(ask), clickhouse.MaxClickCodes)]
		ask = ask[len(batch):]
		clicks, err := ch.backend.AllTimeClicks(batch)
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				n.log.Warn("cannot read all-time clicks for click limits; checking again", "codes", len(batch), "err", err)
			}
			l.failed.Inc()
			l.mu.Lock()
			for _, c := range batch {
				l.pending[c] = struct{}{}
			}
			l.mu.Unlock()
			continue
		}
		for _, code := range batch {
			limit := limits[code]
			if clicks[code] < limit {
				continue
			}
			if len(l.fired) >= chLimitMaxFired {
				clear(l.fired)
			}
			l.fired[code] = firedLimit{limit, time.Now()}
			l.reached.Inc()
			n.log.Info("click limit reached", "code", code, "limit", limit, "clicks", clicks[code])
			n.onClickLimit(code)
		}
	}
}
