package ingest

import (
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// Drop reasons, used as the reason label of waymark_ingest_dropped_total
// and as the X-Waymark-Dropped header value.
const (
	DropQueueFull   = "queue_full"   // the in-memory queue was full
	DropDiskCap     = "disk_cap"     // unshipped data reached MaxPendingBytes
	DropInvalid     = "invalid"      // the endpoint answered 400
	DropUnknownSite = "unknown_site" // no site registered for the domain
	DropOrigin      = "origin"       // Origin header not the site's domain
	DropRateLimit   = "rate_limit"   // per-site or per-IP token bucket empty
	DropIOError     = "io_error"     // the segment write failed
	DropClosed      = "closed"       // arrived while the pipeline was closing
)

var dropReasons = []string{DropQueueFull, DropDiskCap, DropInvalid, DropUnknownSite, DropOrigin, DropRateLimit, DropIOError, DropClosed, DropDNT}

// pipelineMetrics are the counters and gauges of one pipeline.
type pipelineMetrics struct {
	dropped         map[string]*metrics.Counter
	written         *metrics.Counter
	bots            *metrics.Counter
	shippedSegments *metrics.Counter
	shippedEvents   *metrics.Counter
	shippedBytes    *metrics.Counter
	shipRetries     *metrics.Counter
	corruptSegments *metrics.Counter
}

func newPipelineMetrics(set *metrics.Set, p *Pipeline) *pipelineMetrics {
	m := &pipelineMetrics{dropped: make(map[string]*metrics.Counter, len(dropReasons))}
	for _, r := range dropReasons {
		m.dropped[r] = set.GetOrCreateCounter(`waymark_ingest_dropped_total{reason="` + r + `"}`)
	}
	m.written = set.GetOrCreateCounter("waymark_ingest_written_events_total")
	m.bots = set.GetOrCreateCounter("waymark_ingest_bot_events_total")
	m.shippedSegments = set.GetOrCreateCounter("waymark_ingest_shipped_segments_total")
	m.shippedEvents = set.GetOrCreateCounter("waymark_ingest_shipped_events_total")
	m.shippedBytes = set.GetOrCreateCounter("waymark_ingest_shipped_bytes_total")
	m.shipRetries = set.GetOrCreateCounter("waymark_ingest_ship_retries_total")
	m.corruptSegments = set.GetOrCreateCounter("waymark_ingest_corrupt_segments_total")
	set.GetOrCreateGauge("waymark_ingest_queue_length", func() float64 { return float64(p.queue.Len()) })
	set.GetOrCreateGauge("waymark_ingest_drop_tallies", func() float64 { return float64(p.tallies.len()) })
	set.GetOrCreateGauge("waymark_ingest_pending_bytes", func() float64 { return float64(p.pendingBytes.Load()) })
	set.GetOrCreateGauge("waymark_ingest_oldest_pending_age_seconds", func() float64 {
		return p.OldestPendingAge().Seconds()
	})
	return m
}

func (m *pipelineMetrics) drop(reason string) { m.dropped[reason].Inc() }

// OldestPendingAge is how long the oldest event not yet acknowledged by the
// aggregator has been waiting (0 when nothing waits). Readiness checks use
// it to notice a stalled shipper.
func (p *Pipeline) OldestPendingAge() time.Duration {
	oldest := p.oldestSealedMs.Load()
	for _, ms := range [...]int64{p.sealingMs.Load(), p.openCreatedMs.Load()} {
		if ms != 0 && (oldest == 0 || ms < oldest) {
			oldest = ms
		}
	}
	if oldest == 0 {
		return 0
	}
	return max(p.now().Sub(time.UnixMilli(oldest)), 0)
}

// noteSealed counts a segment just sealed in the oldest-pending gauge at
// once: a shipper backing off from an unreachable aggregator may not list
// the folder again for minutes, and until then the gauge would read 0
// while the segment waits.
func (p *Pipeline) noteSealed(created time.Time) {
	ms := created.UnixMilli()
	for {
		cur := p.oldestSealedMs.Load()
		if (cur != 0 && cur <= ms) || p.oldestSealedMs.CompareAndSwap(cur, ms) {
			return
		}
	}
}

// PendingBytes is the size of the segments on disk not yet acknowledged.
func (p *Pipeline) PendingBytes() int64 { return p.pendingBytes.Load() }

// Dropped returns how many events were dropped for reason so far.
func (p *Pipeline) Dropped(reason string) uint64 {
	if c, ok := p.m.dropped[reason]; ok {
		return c.Get()
	}
	return 0
}
