package rollup

import (
	"testing"

	"github.com/waymark/waymark/ingest"
)

// appendBenchEvent adds ev to a benchmark's pre-verified segment.
func appendBenchEvent(seg *verifiedSegment, ev ingest.Event) {
	ev.Props = nil
	seg.events = append(seg.events, ev)
	seg.payloads = append(seg.payloads, ingest.AppendEvent(nil, &ev))
}

// runApplyBench applies one freshly filled segment per iteration, timing
// only the apply, and reports events/s.
func runApplyBench(b *testing.B, a *Aggregator, seg *verifiedSegment, fill func(batch int), perBatch int) {
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		fill(i)
		b.StartTimer()
		if _, err := a.apply([]*verifiedSegment{seg}); err != nil {
			b.Fatalf("apply: %v", err)
		}
	}
	b.ReportMetric(float64(b.N*perBatch)/b.Elapsed().Seconds(), "events/s")
}
