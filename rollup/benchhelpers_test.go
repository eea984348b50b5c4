package rollup

import (
	"testing"

	"github.com/waymark/waymark/ingest"
)

// appendBenchEvent adds ev to a benchmark's pre-verified segment.
func appendBenchEvent(seg *verifiedSegment, ev ingest.Event) {
	ev.Props = nil
	off := len(seg.enc)
	seg.enc = ingest.AppendEvent(seg.enc, &ev)
	seg.events = append(seg.events, pendingEvent{id: ev.ID, time: ev.Time, bot: ev.Bot(),
		code: ev.Code, site: ev.SiteID, off: off, end: len(seg.enc), ev: ev})
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
