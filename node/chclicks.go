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
	n := ch.n
	var clicks []*ingest.Event
	var queued [][]byte
	hooks := false
	if n.clicks != nil {
		var err error
		if hooks, err = n.store.AnyWebhooks(); err != nil {
			return clickhouse.StoreResult{}, fmt.Errorf("cannot read webhooks: %w", err)
		}
	}
	if hooks {
		if clicks = segmentClicks(raw); len(clicks) > 0 {
			recorded, err := ch.backend.SegmentRecorded(ctx, raw)
			if err != nil {
				return clickhouse.StoreResult{}, err
			}
			if !recorded {
				if queued, err = n.queueClickKeys(clicks); err != nil {
					return clickhouse.StoreResult{}, fmt.Errorf("cannot hand clicks to the webhook outbox: %w", err)
				}
			}
		}
	}
	res, err := ch.backend.StoreSegment(ctx, raw)
	takeBack := len(queued) > 0 && (err == nil && res.Outcome == clickhouse.Duplicate || isRefusal(err))
	if takeBack {
		if rerr := n.clicks.remove(queued); rerr != nil {
			n.log.Warn("cannot take back the clicks of a segment stored before; they may be delivered twice", "err", rerr)
		} else {
			ch.m.clicksTakenBack.Add(len(queued))
		}
	}
	if err != nil {
		return res, err
	}
	if hooks {
		codes := make([]string, 0, len(clicks))
		for _, c := range clicks {
			if !c.Bot() {
				codes = append(codes, c.Code)
			}
		}
		ch.limits.note(codes)
	} else {
		ch.limits.note(segmentClickCodes(raw))
	}
	return res, err
}
