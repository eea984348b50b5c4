package ingest

import (
	"os"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// shipMetrics are the shipper's own counters and gauges.
type shipMetrics struct {
	// rejected counts segments the aggregator refused, by reason.
	rejected map[string]*metrics.Counter
	// rotations counts new incarnations started after a conflict.
	rotations *metrics.Counter
	// Shipping to several aggregators (shipsplit.go): segments shipped
	// in parts, parts sent (a retry's again), failed requests to one
	// aggregator (its partitions move for a while).
	splitSegments      *metrics.Counter
	partsSent          *metrics.Counter
	aggregatorFailures *metrics.Counter
}

func newShipMetrics(set *metrics.Set, s *shipper) shipMetrics {
	m := shipMetrics{rejected: map[string]*metrics.Counter{}}
	for _, r := range []string{RejectMalformed, RejectConflict} {
		m.rejected[r] = set.GetOrCreateCounter(`waymark_ingest_segments_rejected_total{reason="` + r + `"}`)
	}
	m.rotations = set.GetOrCreateCounter("waymark_ingest_incarnation_rotations_total")
	m.splitSegments = set.GetOrCreateCounter("waymark_ingest_split_segments_total")
	m.partsSent = set.GetOrCreateCounter("waymark_ingest_segment_parts_sent_total")
	m.aggregatorFailures = set.GetOrCreateCounter("waymark_ingest_aggregator_failures_total")
	// A counter in seconds, served as a gauge: it only grows.
	set.GetOrCreateGauge("waymark_ingest_ship_held_busy_seconds_total", func() float64 {
		return time.Duration(s.heldNs.Load()).Seconds()
	})
	set.GetOrCreateGauge("waymark_ingest_bad_segments", func() float64 {
		return float64(s.state.status().BadSegments)
	})
	return m
}

// ShipStatus is the shipping side of a node's health: how far behind it
// is and what it had to set aside. Operators see it in `waymark status`
// and the health detail; none of it affects readiness.
type ShipStatus struct {
	Configured        bool          // an aggregator URL is set
	PendingBytes      int64         // segment bytes on disk not yet acknowledged
	OldestPendingAge  time.Duration // age of the oldest event not yet acknowledged
	BadSegments       int           // .bad files in the segment folder
	OldestBad         string        // file name of the oldest .bad segment ("" if none)
	OldestBadAt       time.Time     // when it was last written
	RejectedMalformed uint64        // segments the aggregator refused as malformed, since start
	Conflicts         uint64        // segments re-identified after a conflict, since start
	LastShipped       time.Time     // last 200 answer from the aggregator
	LastError         string        // last failed request, if it came after LastShipped
	LastErrorAt       time.Time
}

// ShipStatus reports the shipper's state.
func (p *Pipeline) ShipStatus() ShipStatus {
	st := p.ship.state.status()
	st.Configured = p.ship.url != "" || (p.cfg.Aggregators != nil && len(p.cfg.Aggregators()) > 0)
	st.PendingBytes = p.PendingBytes()
	st.OldestPendingAge = p.OldestPendingAge()
	st.RejectedMalformed = p.ship.m.rejected[RejectMalformed].Get()
	st.Conflicts = p.ship.m.rejected[RejectConflict].Get()
	return st
}

// badStock counts .bad files during a folder listing.
type badStock struct {
	n      int
	oldest string
	at     time.Time
}

func (b *badStock) add(e os.DirEntry) {
	info, err := e.Info()
	if err != nil {
		return
	}
	b.n++
	if b.oldest == "" || info.ModTime().Before(b.at) {
		b.oldest, b.at = e.Name(), info.ModTime()
	}
}

// shipState is what the shipper goroutine learned, for readers elsewhere.
type shipState struct {
	mu        sync.Mutex
	bad       badStock
	lastOK    time.Time
	lastErr   string
	lastErrAt time.Time
}

func (s *shipState) setBad(b badStock) {
	s.mu.Lock()
	s.bad = b
	s.mu.Unlock()
}

func (s *shipState) addBad(name string, at time.Time) {
	s.mu.Lock()
	s.bad.n++
	if s.bad.oldest == "" || at.Before(s.bad.at) {
		s.bad.oldest, s.bad.at = name, at
	}
	s.mu.Unlock()
}

func (s *shipState) shipped() {
	s.mu.Lock()
	s.lastOK, s.lastErr = time.Now(), ""
	s.mu.Unlock()
}

func (s *shipState) failed(err error) {
	s.mu.Lock()
	s.lastErr, s.lastErrAt = err.Error(), time.Now()
	s.mu.Unlock()
}

func (s *shipState) status() ShipStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ShipStatus{
		BadSegments: s.bad.n, OldestBad: s.bad.oldest, OldestBadAt: s.bad.at,
		LastShipped: s.lastOK, LastError: s.lastErr, LastErrorAt: s.lastErrAt,
	}
}
