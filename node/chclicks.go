package node

import (
	"context"
	"fmt"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/clickhouse"
)

// What a ClickHouse aggregator does around storing one segment, for the
// two things the embedded aggregator's apply does with a segment's
// clicks (rollup/clickhook.go, rollup/limits.go): link.clicked webhooks
// and click limits.
//
// link.clicked, at least once: a segment whose identity ClickHouse has
// not recorded yet hands its clicks to the outbox (queueClickKeys,
// synced) before it is stored, so before it is acknowledged. Then:
//   - stored: the clicks stay queued; the ack follows.
//   - a crash or an error before the ack: the edge sends the segment
//     again. If ClickHouse recorded it, the retry finds it recorded and
//     queues nothing (the first copy is queued); if not, the retry queues
//     its clicks again, and a receiver may get those clicks twice. Each
//     click carries its event id, by which receivers dedup (WEBHOOKS.md).
//   - Duplicate (another aggregator stored it meanwhile) or refused
//     (a conflict, damage): what this call queued is taken back.
// Queuing before the insert, not after, is what keeps a crash between
// the insert and the ack from losing the clicks: the retry of a recorded
// segment is a Duplicate, which feeds nothing.

// segmentClicks returns copies of raw's clicks (props dropped: no
// delivery carries them); nil when raw does not read (StoreSegment then
// says why). Only the clicks are decoded (ingest.ReadSegmentClicks).
func segmentClicks(raw []byte) []*ingest.Event {
	var out []*ingest.Event
	err := ingest.ReadSegmentClicks(raw, func(ev *ingest.Event) error {
		c := *ev // each decoded event's strings are its own
		c.Props = nil
		out = append(out, &c)
		return nil
	})
	if err != nil {
		return nil
	}
	return out
}

// segmentClickCodes returns the distinct link codes of raw's non-bot
// clicks, read without decoding the events (ingest.ReadSegmentClickCodes);
// nil when raw does not read.
func segmentClickCodes(raw []byte) []string {
	seen := make(map[string]struct{})
	var out []string
	err := ingest.ReadSegmentClickCodes(raw, func(code []byte, flags uint8) error {
		if flags&ingest.FlagBot != 0 {
			return nil
		}
		if _, ok := seen[string(code)]; !ok {
			c := string(code)
			seen[c] = struct{}{}
			out = append(out, c)
		}
		return nil
	})
	if err != nil {
		return nil
	}
	return out
}

// storeWithClicks stores raw in ClickHouse, feeding its clicks to the
// link.clicked outbox (decoded only when some owner has a webhook) and
// its clicked links to the click-limit check.
func (ch *chAggregator) storeWithClicks(ctx context.Context, raw []byte) (clickhouse.StoreResult, error) {
	pre, err := ch.beforeStore(ctx, raw)
	if err != nil {
		return clickhouse.StoreResult{}, err
	}
	res, err := ch.backend.StoreSegment(ctx, raw)
	ch.afterStore(raw, pre, res, err)
	return res, err
}

// storeBatchWithClicks is storeWithClicks for a shipped batch, stored
// with one insert (clickhouse.Backend.StoreSegments).
func (ch *chAggregator) storeBatchWithClicks(ctx context.Context, raws [][]byte) ([]clickhouse.StoreResult, []error) {
	pres := make([]clickPrep, len(raws))
	var todo [][]byte
	var at []int
	out, errs := make([]clickhouse.StoreResult, len(raws)), make([]error, len(raws))
	for i, raw := range raws {
		if pres[i], errs[i] = ch.beforeStore(ctx, raw); errs[i] == nil {
			todo, at = append(todo, raw), append(at, i)
		}
	}
	res, rerrs := ch.backend.StoreSegments(ctx, todo)
	for k, i := range at {
		out[i], errs[i] = res[k], rerrs[k]
		ch.afterStore(raws[i], pres[i], res[k], rerrs[k])
	}
	return out, errs
}

// clickPrep is what beforeStore did for one segment.
type clickPrep struct {
	hooks  bool
	clicks []*ingest.Event
	queued [][]byte // outbox keys written
}

// beforeStore queues a segment's clicks for link.clicked when some owner
// has a webhook and ClickHouse has not recorded the segment yet.
func (ch *chAggregator) beforeStore(ctx context.Context, raw []byte) (clickPrep, error) {
	n := ch.n
	var p clickPrep
	if n.clicks != nil {
		var err error
		if p.hooks, err = n.store.AnyWebhooks(); err != nil {
			return p, fmt.Errorf("cannot read webhooks: %w", err)
		}
	}
	if !p.hooks {
		return p, nil
	}
	if p.clicks = segmentClicks(raw); len(p.clicks) > 0 {
		recorded, err := ch.backend.SegmentRecorded(ctx, raw)
		if err != nil {
			return p, err
		}
		if !recorded {
			if p.queued, err = n.queueClickKeys(p.clicks); err != nil {
				return p, fmt.Errorf("cannot hand clicks to the webhook outbox: %w", err)
			}
		}
	}
	return p, nil
}

// afterStore takes back the queued clicks of a segment stored before (or
// refused), and notes its clicked links for the click-limit check.
func (ch *chAggregator) afterStore(raw []byte, p clickPrep, res clickhouse.StoreResult, err error) {
	n := ch.n
	takeBack := len(p.queued) > 0 && (err == nil && res.Outcome == clickhouse.Duplicate || isRefusal(err))
	if takeBack {
		if rerr := n.clicks.remove(p.queued); rerr != nil {
			n.log.Warn("cannot take back the clicks of a segment stored before; they may be delivered twice", "err", rerr)
		} else {
			ch.m.clicksTakenBack.Add(len(p.queued))
		}
	}
	if err != nil {
		return
	}
	if p.hooks {
		codes := make([]string, 0, len(p.clicks))
		for _, c := range p.clicks {
			if !c.Bot() {
				codes = append(codes, c.Code)
			}
		}
		ch.limits.note(codes)
	} else {
		ch.limits.note(segmentClickCodes(raw))
	}
}
