package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// fakeAggregator is a real HTTP server on 127.0.0.1:0 that speaks the
// aggregator side of the shipping protocol the way the real one does: it
// keeps events per segment identity, acknowledges a repeat with the same
// bytes, refuses a repeat with different bytes as "conflict" and a segment
// that fails ReadSegment as "malformed".
type fakeAggregator struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	mode   string // "ack", "fail", "partial" (ack only the first segment) or "nos2" (refuse s2 bodies, as an older aggregator)
	stored map[SegmentRef]int
	sums   map[SegmentRef][32]byte
	acked  map[SegmentRef]bool
	sent   map[uint64]int // times each seq was sent, any incarnation
	sentAt map[uint64][]time.Time
	// refuse answers these seqs with a rejection reason; silent leaves
	// them out of the answer altogether.
	refuse    map[uint64]string
	silent    map[uint64]bool
	posts     int
	resent    int // segments sent again, same bytes, after they were acknowledged
	conflicts int
	// conflicted keeps the records (everything after the header) of each
	// segment refused as a conflict, by seq.
	conflicted map[uint64][]byte
	records    map[SegmentRef][]byte // the same, of every stored segment
	encodings  []string              // Content-Encoding of each post
}

func newFakeAggregator(t *testing.T, mode string) *fakeAggregator {
	a := &fakeAggregator{t: t, mode: mode, stored: map[SegmentRef]int{}, sums: map[SegmentRef][32]byte{},
		acked: map[SegmentRef]bool{}, sent: map[uint64]int{}, sentAt: map[uint64][]time.Time{}, refuse: map[uint64]string{}, silent: map[uint64]bool{},
		conflicted: map[uint64][]byte{}, records: map[SegmentRef][]byte{}}
	a.srv = httptest.NewServer(http.HandlerFunc(a.handle))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *fakeAggregator) setMode(m string) {
	a.mu.Lock()
	a.mode = m
	a.mu.Unlock()
}

func (a *fakeAggregator) sentCount(seq uint64) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sent[seq]
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
	a.encodings = append(a.encodings, r.Header.Get("Content-Encoding"))
	if a.mode == "nos2" && r.Header.Get("Content-Encoding") == "s2" {
		// What an aggregator of the version before s2 answers.
		http.Error(w, `cannot read batch: unsupported Content-Encoding "s2"`, http.StatusBadRequest)
		return
	}
	ack := ShipAck{Acked: []SegmentRef{}}
	reject := func(ref SegmentRef, reason string) {
		ack.Rejected = append(ack.Rejected, SegmentRejection{SegmentRef: ref, Reason: reason})
	}
	err := ReadBatch(body, r.Header.Get("Content-Encoding"), 64<<20, func(seg BatchSegment) error {
		a.sent[seg.Ref.Seq]++
		a.sentAt[seg.Ref.Seq] = append(a.sentAt[seg.Ref.Seq], time.Now())
		if a.acked[seg.Ref] && a.sums[seg.Ref] == sha256.Sum256(seg.Data) {
			a.resent++
		}
		if reason := a.refuse[seg.Ref.Seq]; reason != "" {
			reject(seg.Ref, reason)
			return nil
		}
		if a.silent[seg.Ref.Seq] || (a.mode == "partial" && len(ack.Acked) > 0) {
			return nil
		}
		n := 0
		h, err := ReadSegment(seg.Data, func(*Event) error { n++; return nil })
		if err != nil || h.Ref() != seg.Ref {
			reject(seg.Ref, RejectMalformed)
			return nil
		}
		sum := sha256.Sum256(seg.Data)
		_, start, _ := parseSegmentHeader(seg.Data)
		if old, ok := a.sums[seg.Ref]; ok && old != sum {
			a.conflicts++
			a.conflicted[seg.Ref.Seq] = append([]byte(nil), seg.Data[start:]...)
			reject(seg.Ref, RejectConflict)
			return nil
		} else if !ok {
			a.sums[seg.Ref] = sum
			a.stored[seg.Ref] = n
			a.records[seg.Ref] = append([]byte(nil), seg.Data[start:]...)
		}
		ack.Acked = append(ack.Acked, seg.Ref)
		a.acked[seg.Ref] = true
		return nil
	})
	if err != nil {
		a.t.Errorf("aggregator got a bad batch: %v", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(ack)
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

// TestShipperLargeSegmentInSteps ships one segment bigger than both the
// shipper's read step and s2's block size, so it is read in several
// read(2) calls and compressed in several blocks with the processor given
// up in between; the aggregator must get every record, in one segment
// whose own check passes.
func TestShipperLargeSegmentInSteps(t *testing.T) {
	agg := newFakeAggregator(t, "ack")
	p := openTestPipeline(t, func(c *Config) {
		c.AggregatorURL = agg.srv.URL
		c.ShipToken = "s3cret"
		c.SegmentMaxBytes = 64 << 20      // sealed by age, after all clicks are in
		c.SegmentMaxAge = 3 * time.Second // capturing takes well under that
		c.ShipBatchMaxBytes = 64 << 20
	})
	const clicks = 30_000
	ctx := clickCtx("http://wm.example/c?utm_source=a-long-enough-source&utm_campaign=and-a-campaign-name", "203.0.113.7",
		map[string]string{"Referer": "https://news.example.com/story"})
	for i := range clicks {
		p.CaptureClick(ctx, []byte("c"))
		if i%4096 == 4095 {
			waitFor(t, "queue drained", func() bool { return p.QueueLen() == 0 })
		}
	}
	waitFor(t, "every click shipped", func() bool { return p.PendingBytes() == 0 && agg.events() == clicks })
	agg.mu.Lock()
	defer agg.mu.Unlock()
	largest := 0
	for ref := range agg.stored {
		largest = max(largest, len(agg.records[ref]))
	}
	if largest <= max(readStep, 1<<20) {
		t.Fatalf("largest segment: %d bytes of records; want more than one read step and one s2 block (%d)", largest, max(readStep, 1<<20))
	}
}
