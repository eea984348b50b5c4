package rollup

import (
	"syscall"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
)

// appendBenchEvent adds ev to a benchmark's pre-verified segment.
func appendBenchEvent(seg *verifiedSegment, ev ingest.Event) {
	ev.Props = nil
	seg.events = append(seg.events, ev)
	seg.payloads = append(seg.payloads, ingest.AppendEvent(nil, &ev))
}

// runApplyBench applies one freshly filled segment per iteration, timing
// only the apply, and reports events/s and the process's CPU time per
// event during the applies (user + system, all goroutines: Pebble's
// flushes and compactions included), which a shared machine disturbs far
// less than wall time; 1e6 / cpu-µs/event is the rate one core sustains.
func runApplyBench(b *testing.B, a *Aggregator, seg *verifiedSegment, fill func(batch int), perBatch int) {
	b.ReportAllocs()
	b.ResetTimer()
	var cpu time.Duration
	for i := range b.N {
		b.StopTimer()
		fill(i)
		c0 := processCPU()
		b.StartTimer()
		if _, err := a.apply([]*verifiedSegment{seg}); err != nil {
			b.Fatalf("apply: %v", err)
		}
		b.StopTimer()
		cpu += processCPU() - c0
		b.StartTimer()
	}
	// The last checkpoint is part of the work: until it, rollups wait in
	// memory.
	c0 := processCPU()
	if err := a.catchUp(); err != nil {
		b.Fatalf("checkpoint: %v", err)
	}
	cpu += processCPU() - c0
	b.ReportMetric(float64(b.N*perBatch)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*perBatch), "cpu-µs/event")
}

// processCPU is the process's user + system time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
