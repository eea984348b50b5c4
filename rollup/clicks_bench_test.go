package rollup

import (
	"fmt"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
)

// BenchmarkApplyUniformClicks applies clicks on 100,000 links picked
// uniformly at random, from 20,000 visitors, inside one hour, in batches
// of 20,000: the redirect benchmark's load on a --dev node, and the
// aggregator's worst case (almost no cell of a click is shared with
// another click of the same checkpoint).
func BenchmarkApplyUniformClicks(b *testing.B) {
	const perBatch, links = 20_000, 100_000
	a, err := Open(testConfig(&testing.T{}, b.TempDir(), &testClock{now: base}))
	if err != nil {
		b.Fatalf("Open: %v", err)
	}
	defer a.Close()
	codes := make([]string, links)
	for i := range codes {
		codes[i] = fmt.Sprintf("c%06d", i)
	}
	seg := &verifiedSegment{}
	n := 0
	fill := func(batch int) {
		seg.payloads, seg.events = seg.payloads[:0], seg.events[:0]
		for range perBatch {
			n++
			t := base.Add(-time.Hour + time.Duration(n/20)*time.Millisecond)
			ev := click("uc", n, codes[mix64(uint64(n))%links], t, false)
			ev.VisitorHash = mix64(uint64(n % 20_000))
			appendBenchEvent(seg, ev)
		}
		seg.ref = ingest.SegmentRef{Node: "edge-1", Seq: uint64(batch + 1)}
	}
	runApplyBench(b, a, seg, fill, perBatch)
}
