package rollup

import (
	"fmt"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
)

// BenchmarkApplyManyVisitors applies 4,000-event batches shaped like the
// event ingest benchmark (bench/cmd/eventbench -sites 64): pageviews spread
// over 64 sites and 1,000 pages each, almost every event from a visitor
// never seen before, all in the current hour. Each batch is fsynced.
func BenchmarkApplyManyVisitors(b *testing.B) {
	const perBatch, sites, pages = 4000, 64, 1000
	clock := &testClock{now: base}
	a, err := Open(testConfig(&testing.T{}, b.TempDir(), clock))
	if err != nil {
		b.Fatalf("Open: %v", err)
	}
	defer a.Close()
	siteIDs := make([]string, sites)
	for i := range siteIDs {
		siteIDs[i] = fmt.Sprintf("site%02d", i)
	}
	pagePaths := make([]string, pages)
	for i := range pagePaths {
		pagePaths[i] = fmt.Sprintf("/p/%d", i)
	}
	seg := &verifiedSegment{}
	rng := uint64(1)
	next := func() uint64 { rng = mix64(rng + 0x9e3779b97f4a7c15); return rng }
	n := 0
	fill := func(batch int) {
		seg.payloads, seg.events = seg.payloads[:0], seg.events[:0]
		for i := range perBatch {
			n++
			t := base.Add(-time.Hour + time.Duration(batch)*100*time.Millisecond + time.Duration(i)*time.Millisecond/40)
			ev := pageview("mv", n, siteIDs[next()%sites], t, false)
			ev.VisitorHash = next()
			ev.Path = pagePaths[next()%pages]
			ev.ReferrerHost = "ref.example"
			ev.Device, ev.Browser, ev.OS = "desktop", "Chrome", "Windows"
			appendBenchEvent(seg, ev)
		}
		seg.ref = ingest.SegmentRef{Node: "edge-1", Seq: uint64(batch + 1)}
	}
	runApplyBench(b, a, seg, fill, perBatch)
}
