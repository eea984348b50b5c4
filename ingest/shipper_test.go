package ingest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// fakeAggregator is a real HTTP server on 127.0.0.1:0 that speaks the
// aggregator side of the shipping protocol, keeping events per segment the
// way the real one dedups: by (node, seq).
type fakeAggregator struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	mode   string // "ack", "fail" or "partial" (ack only the first segment)
	stored map[SegmentRef]int
	acked  map[SegmentRef]bool
	posts  int
	resent int // segments sent again after they were acknowledged
}

func newFakeAggregator(t *testing.T, mode string) *fakeAggregator {
	a := &fakeAggregator{t: t, mode: mode, stored: map[SegmentRef]int{}, acked: map[SegmentRef]bool{}}
	a.srv = httptest.NewServer(http.HandlerFunc(a.handle))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *fakeAggregator) setMode(m string) {
	a.mu.Lock()
	a.mode = m
	a.mu.Unlock()
}

func (a *fakeAggregator) handle(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != ShipPath || r.Header.Get("Authorization") != "Bearer s3cret" || r.Method != http.MethodPost {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	body, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.posts++
	if a.mode == "fail" {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	var ack ShipAck
	err := ReadBatch(body, r.Header.Get("Content-Encoding"), 64<<20, func(seg BatchSegment) error {
		if a.acked[seg.Ref] {
			a.resent++
		}
		n := 0
		h, err := ReadSegment(seg.Data, func(*Event) error { n++; return nil })
		if err != nil {
			return err
		}
		if h.NodeID != seg.Ref.Node || h.Seq != seg.Ref.Seq {
			return fmt.Errorf("header %s/%d does not match frame %+v", h.NodeID, h.Seq, seg.Ref)
		}
		if _, dup := a.stored[seg.Ref]; !dup {
			a.stored[seg.Ref] = n
		}
		if a.mode == "ack" || len(ack.Acked) == 0 {
			ack.Acked = append(ack.Acked, seg.Ref)
			a.acked[seg.Ref] = true
		}
		return nil
	})
	if err != nil {
		a.t.Errorf("aggregator got a bad batch: %v", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"acked":[`)
	for i, r := range ack.Acked {
		if i > 0 {
			fmt.Fprint(w, ",")
		}
		fmt.Fprintf(w, `{"node":%q,"seq":%d}`, r.Node, r.Seq)
	}
	fmt.Fprint(w, "]}")
}

func (a *fakeAggregator) events() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, c := range a.stored {
		n += c
	}
	return n
}

func shipPipeline(t *testing.T, agg *fakeAggregator) *Pipeline {
	return openTestPipeline(t, func(c *Config) {
		c.AggregatorURL = agg.srv.URL
		c.ShipToken = "s3cret"
		c.SegmentMaxBytes = 1024 // many small segments
		c.SegmentMaxAge = 20 * time.Millisecond
		c.ShipBatchMaxBytes = 3000 // a few segments per batch
		c.ShipMaxBackoff = 20 * time.Millisecond
	})
}

func captureN(p *Pipeline, n int) {
	ctx := clickCtx("http://wm.example/c", "203.0.113.7", nil)
	for range n {
		p.CaptureClick(ctx, []byte("c"))
	}
}

func TestShipperAcked(t *testing.T) {
	agg := newFakeAggregator(t, "ack")
	p := shipPipeline(t, agg)
	captureN(p, 200)
	waitFor(t, "all events at the aggregator", func() bool { return agg.events() == 200 })
	waitFor(t, "shipped segments deleted", func() bool { return len(sealedFiles(t, p.cfg.Dir)) == 0 && p.PendingBytes() == 0 })
	if p.m.shippedEvents.Get() != 200 {
		t.Errorf("got %d shipped events; want 200", p.m.shippedEvents.Get())
	}
	if agg.resent != 0 {
		t.Errorf("got %d acknowledged segments sent again; want 0", agg.resent)
	}
}

// TestShipperRetriesUntilAcked: while the aggregator fails, nothing is
// deleted; once it recovers everything arrives once.
func TestShipperRetriesUntilAcked(t *testing.T) {
	agg := newFakeAggregator(t, "fail")
	p := shipPipeline(t, agg)
	captureN(p, 100)
	waitFor(t, "some failed attempts", func() bool { return p.m.shipRetries.Get() >= 3 })
	if len(sealedFiles(t, p.cfg.Dir)) == 0 {
		t.Fatalf("segments deleted without an acknowledgement")
	}
	if got := len(readSealed(t, p.cfg.Dir)); got > 100 || p.m.shippedSegments.Get() != 0 {
		t.Fatalf("got %d events on disk, %d shipped; want nothing shipped", got, p.m.shippedSegments.Get())
	}
	agg.setMode("ack")
	waitFor(t, "all events at the aggregator", func() bool { return agg.events() == 100 })
	waitFor(t, "segments deleted", func() bool { return p.PendingBytes() == 0 })
}

// TestShipperPartialAck: only acknowledged segments are deleted; the rest
// are sent again, and nothing acknowledged is ever sent twice.
func TestShipperPartialAck(t *testing.T) {
	agg := newFakeAggregator(t, "partial")
	p := shipPipeline(t, agg)
	captureN(p, 150)
	waitFor(t, "every event written", func() bool { return p.m.written.Get() == 150 })
	waitFor(t, "all segments acknowledged", func() bool { return p.PendingBytes() == 0 })
	agg.mu.Lock()
	defer agg.mu.Unlock()
	got := 0
	for _, c := range agg.stored {
		got += c
	}
	if got != 150 || p.m.shippedEvents.Get() != 150 {
		t.Errorf("got %d events at the aggregator, %d shipped; want 150", got, p.m.shippedEvents.Get())
	}
	if agg.resent != 0 {
		t.Errorf("got %d acknowledged segments sent again; want 0", agg.resent)
	}
	if agg.posts <= len(agg.stored)/3 {
		t.Errorf("got %d posts for %d segments; want retries (one ack per post)", agg.posts, len(agg.stored))
	}
}

// TestShipperResumesAfterRestart: segments left on disk by a closed
// pipeline are shipped by the next one, each exactly once at the
// aggregator even if an answer was lost in the shutdown.
func TestShipperResumesAfterRestart(t *testing.T) {
	agg := newFakeAggregator(t, "fail")
	p := shipPipeline(t, agg)
	captureN(p, 80)
	waitFor(t, "every event written", func() bool { return p.m.written.Get() == 80 })
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	agg.setMode("ack")
	p2 := openTestPipeline(t, func(c *Config) {
		c.Dir = p.cfg.Dir
		c.AggregatorURL = agg.srv.URL
		c.ShipToken = "s3cret"
		c.ShipBatchMaxBytes = 3000
	})
	waitFor(t, "all segments acknowledged", func() bool { return p2.PendingBytes() == 0 })
	if got := agg.events(); got != 80 {
		t.Errorf("got %d events at the aggregator; want 80", got)
	}
}

func TestShipperQuarantinesDamagedSegment(t *testing.T) {
	agg := newFakeAggregator(t, "fail")
	p := shipPipeline(t, agg)
	captureN(p, 30)
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	files := sealedFiles(t, p.cfg.Dir)
	if len(files) == 0 {
		t.Fatal("no segments")
	}
	b, _ := readFile(t, files[0])
	b[len(b)/2] ^= 0x40
	writeFile(t, files[0], b)
	agg.setMode("ack")
	p2 := openTestPipeline(t, func(c *Config) {
		c.Dir = p.cfg.Dir
		c.AggregatorURL = agg.srv.URL
		c.ShipToken = "s3cret"
	})
	waitFor(t, "the rest shipped", func() bool { return p2.PendingBytes() == 0 })
	if p2.m.corruptSegments.Get() != 1 {
		t.Errorf("got %d corrupt segments; want 1", p2.m.corruptSegments.Get())
	}
}
