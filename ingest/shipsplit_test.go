package ingest

import (
	"fmt"
	"testing"
	"time"
)

// multiPipeline ships to the given fake aggregators, named "agg-0",
// "agg-1", ... for rendezvous hashing.
func multiPipeline(t *testing.T, aggs ...*fakeAggregator) *Pipeline {
	targets := make([]Aggregator, len(aggs))
	for i, a := range aggs {
		targets[i] = Aggregator{Name: fmt.Sprintf("agg-%d", i), URL: a.srv.URL, Alive: true}
	}
	return openTestPipeline(t, func(c *Config) {
		c.Aggregators = func() []Aggregator { return targets }
		c.ShipToken = "s3cret"
		c.SegmentMaxBytes = 4096
		c.SegmentMaxAge = 20 * time.Millisecond
		c.ShipBatchMaxBytes = 16 << 10
		c.ShipMaxBackoff = 50 * time.Millisecond
	})
}

// captureLinks captures n clicks, on 20 links in turn.
func captureLinks(p *Pipeline, n int) {
	for i := range n {
		code := fmt.Sprintf("l%d", i%20)
		p.CaptureClick(clickCtx("http://wm.example/"+code, "203.0.113.7", nil), []byte(code))
	}
}

func TestShipperSplitsOverTwoAggregators(t *testing.T) {
	a, b := newFakeAggregator(t, "ack"), newFakeAggregator(t, "ack")
	p := multiPipeline(t, a, b)
	captureLinks(p, 200)
	waitFor(t, "every click at one aggregator or the other", func() bool { return a.events()+b.events() == 200 })
	waitFor(t, "shipped segments deleted", func() bool { return p.PendingBytes() == 0 && len(sealedFiles(t, p.cfg.Dir)) == 0 })
	var owners [Partitions]int
	PartitionOwners([]string{"agg-0", "agg-1"}, &owners)
	for i, agg := range []*fakeAggregator{a, b} {
		agg.mu.Lock()
		if len(agg.stored) == 0 {
			t.Errorf("aggregator %d got nothing; 20 links over 64 partitions should reach both", i)
		}
		for ref := range agg.stored {
			if ref.Part == 0 {
				t.Errorf("aggregator %d got a whole segment %+v", i, ref)
			} else if owners[ref.Part-1] != i {
				t.Errorf("aggregator %d got part %d, which agg-%d owns", i, ref.Part, owners[ref.Part-1])
			}
		}
		if agg.resent != 0 {
			t.Errorf("aggregator %d got %d acknowledged parts again", i, agg.resent)
		}
		agg.mu.Unlock()
	}
	if p.m.shippedEvents.Get() != 200 {
		t.Errorf("%d events counted shipped; want 200", p.m.shippedEvents.Get())
	}
}

// TestShipperMovesPartitionsOffAFailingAggregator: one aggregator fails
// every request; its partitions go to the other, nothing is lost, and
// nothing counts twice.
func TestShipperMovesPartitionsOffAFailingAggregator(t *testing.T) {
	a, b := newFakeAggregator(t, "ack"), newFakeAggregator(t, "fail")
	p := multiPipeline(t, a, b)
	captureLinks(p, 200)
	waitFor(t, "every click at the aggregator that works", func() bool { return a.events() == 200 })
	waitFor(t, "shipped segments deleted", func() bool { return p.PendingBytes() == 0 })
	var owners [Partitions]int
	PartitionOwners([]string{"agg-0", "agg-1"}, &owners)
	moved := 0
	a.mu.Lock()
	for ref := range a.stored {
		if owners[ref.Part-1] == 1 {
			moved++
		}
	}
	a.mu.Unlock()
	if moved == 0 {
		t.Fatalf("no part of agg-1's partitions reached agg-0")
	}
	// Back: agg-1 takes its partitions again, for new segments, once the
	// shipper's skip of it (up to ShipMaxBackoff after its last failure)
	// has passed: segments sealed before that still go to agg-0, so
	// clicks keep coming until agg-1 has some.
	b.setMode("ack")
	captured := 200
	waitFor(t, "agg-1 storing again", func() bool {
		captureLinks(p, 20)
		captured += 20
		return b.events() > 0
	})
	waitFor(t, "every click stored once", func() bool { return a.events()+b.events() == captured })
	waitFor(t, "shipped segments deleted", func() bool { return p.PendingBytes() == 0 })
}

// TestShipperKeepsAWholeSegmentWhole: a segment sent whole once (one
// aggregator) goes whole again after a second aggregator appears, never
// as parts, whose record numbers would differ from a half-stored whole.
func TestShipperKeepsAWholeSegmentWhole(t *testing.T) {
	a, b := newFakeAggregator(t, "fail"), newFakeAggregator(t, "ack")
	var targets []Aggregator
	var mu = make(chan struct{}, 1)
	mu <- struct{}{}
	set := func(ts []Aggregator) { <-mu; targets = ts; mu <- struct{}{} }
	get := func() []Aggregator { <-mu; defer func() { mu <- struct{}{} }(); return targets }
	set([]Aggregator{{Name: "agg-0", URL: a.srv.URL, Alive: true}})
	p := openTestPipeline(t, func(c *Config) {
		c.Aggregators = get
		c.ShipToken = "s3cret"
		c.SegmentMaxBytes = 4096
		c.SegmentMaxAge = 20 * time.Millisecond
		c.ShipMaxBackoff = 50 * time.Millisecond
	})
	captureLinks(p, 100)
	waitFor(t, "segments tried whole", func() bool { return p.m.shipRetries.Get() >= 2 })
	tried := map[uint64]bool{}
	a.setMode("ack")
	for _, f := range sealedFiles(t, p.cfg.Dir) {
		if seq, ok := parseSegmentName(f[len(f)-len(segmentName(0, sealedSuffix)):], sealedSuffix); ok {
			tried[seq] = true
		}
	}
	set([]Aggregator{{Name: "agg-0", URL: a.srv.URL, Alive: true}, {Name: "agg-1", URL: b.srv.URL, Alive: true}})
	waitFor(t, "every click stored", func() bool { return a.events()+b.events() == 100 })
	for _, agg := range []*fakeAggregator{a, b} {
		agg.mu.Lock()
		for ref := range agg.stored {
			if ref.Part != 0 && tried[ref.Seq] {
				t.Errorf("segment %d, tried whole, was sent as part %d", ref.Seq, ref.Part)
			}
		}
		agg.mu.Unlock()
	}
}
