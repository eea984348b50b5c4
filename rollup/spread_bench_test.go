package rollup

import (
	"fmt"
	"testing"
	"time"

	"github.com/waymark/waymark/bench/harness"
	"github.com/waymark/waymark/ingest"
)

// BenchmarkApplySpread applies the aggregation benchmark's event stream
// (bench/harness.SpreadGen: 20 sites and 2,000 links by Zipf popularity,
// 100,000 visitors in sessions, engagement, custom events, 40 % clicks),
// 400,000 events over one day in time order, in batches of 40,000 (eight
// 5,000-event segments, as bench/cmd/aggbench posts them). cpu-µs/event
// is the rate one core sustains.
func BenchmarkApplySpread(b *testing.B) {
	for _, days := range []int{1, 30} {
		b.Run(fmt.Sprintf("days=%d", days), func(b *testing.B) { benchSpread(b, days) })
	}
}

func benchSpread(b *testing.B, days int) {
	cfg := harness.SpreadConfig{Seed: 1, Events: 400_000, Start: base.Add(-time.Duration(days) * 24 * time.Hour),
		Days: days, ClickShare: 0.4, Node: "edge-1", Region: "eu"}
	for i := range 20 {
		cfg.Sites = append(cfg.Sites, fmt.Sprintf("site%02d", i))
	}
	for i := range 2000 {
		cfg.Links = append(cfg.Links, fmt.Sprintf("l%05d", i))
	}
	g, err := harness.NewSpreadGen(cfg)
	if err != nil {
		b.Fatal(err)
	}
	var all []ingest.Event
	for {
		var ev ingest.Event
		if !g.Next(&ev) {
			break
		}
		ev.Props = append([]ingest.Prop(nil), ev.Props...)
		all = append(all, ev)
	}
	a, err := Open(testConfig(&testing.T{}, b.TempDir(), &testClock{now: base}))
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	const per = 40_000
	seg := &verifiedSegment{}
	off := 0
	fill := func(batch int) {
		seg.payloads, seg.events = seg.payloads[:0], seg.events[:0]
		for range per {
			ev := all[off%len(all)]
			if off >= len(all) { // a second pass: new events, not repeats
				ev.ID[0] ^= byte(off / len(all))
			}
			off++
			seg.events = append(seg.events, ev)
			seg.payloads = append(seg.payloads, ingest.AppendEvent(nil, &ev))
		}
		seg.ref = ingest.SegmentRef{Node: "edge-1", Inc: 1, Seq: uint64(batch + 1)}
	}
	runApplyBench(b, a, seg, fill, per)
}
