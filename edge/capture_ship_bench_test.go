package edge_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/edge"
	"github.com/waymark/waymark/ingest"
)

// BenchmarkRedirectCaptureShipped is what a click costs the edge in all,
// on the cores that serve it: the redirect, the capture on the serving
// goroutine, the writer (enrichment, visitor hash, encoding, write(2)) and
// the shipper (segment check, compression, the POST), for clicks from
// 20,000 distinct visitors (a user agent and an address each). Segments
// seal every 100 ms and go to an aggregator that acknowledges them; the
// timer runs until all are acknowledged. Pinned to one core (taskset -c
// 1), ns/op is the edge CPU per click; the stand-in aggregator's
// decompression is included too (it is in the same process).
func BenchmarkRedirectCaptureShipped(b *testing.B) {
	agg := httptest.NewServer(http.HandlerFunc(ackAll))
	defer agg.Close()
	p, err := ingest.Open(ingest.Config{
		Dir: b.TempDir(), NodeID: "bench", Region: "eu",
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		AggregatorURL:  agg.URL, ShipToken: "t", SegmentMaxAge: 100 * time.Millisecond,
		Metrics: metrics.NewSet(),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(b.Context())
	benchDistinctVisitors(b, edge.NewBenchServer(b, edge.Config{OnRedirect: p.CaptureClick}).Handler(), p)
}

// BenchmarkRedirectDistinctVisitorsNoCapture is the same requests with
// capture off: BenchmarkRedirectCaptureShipped minus this is what capture
// costs a click.
func BenchmarkRedirectDistinctVisitorsNoCapture(b *testing.B) {
	benchDistinctVisitors(b, edge.NewBenchServer(b, edge.Config{}).Handler(), nil)
}

// benchDistinctVisitors serves clicks on one link from 20,000 visitors,
// waiting for p (if any) to ship everything before and after the timed
// loop.
func benchDistinctVisitors(b *testing.B, h fasthttp.RequestHandler, p *ingest.Pipeline) {
	const visitors = 20_000
	uas := make([][]byte, visitors)
	addrs := make([][]byte, visitors)
	for i := range visitors {
		uas[i] = fmt.Appendf(nil, "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/%d.0.%d.%d Safari/537.36", 100+i%40, i, (i*7)%1000)
		addrs[i] = fmt.Appendf(nil, "198.18.%d.%d", i/250, i%250+1)
	}
	ctx := clickRequest()
	hit := func(i int) {
		v := (i * 7919) % visitors
		ctx.Request.Header.SetUserAgentBytes(uas[v])
		ctx.Request.Header.SetBytesV("X-Forwarded-For", addrs[v])
		if got := serve(h, ctx); got != fasthttp.StatusFound {
			b.Fatalf("status: got %d; want 302", got)
		}
	}
	for i := range visitors { // every visitor seen once
		hit(i)
	}
	if p != nil {
		waitShipped(b, p)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		hit(i)
	}
	if p == nil {
		return
	}
	waitShipped(b, p)
	if n := p.Dropped(ingest.DropQueueFull); n != 0 {
		b.Fatalf("dropped %d clicks as queue_full", n)
	}
}

func waitShipped(tb testing.TB, p *ingest.Pipeline) {
	deadline := time.Now().Add(30 * time.Second)
	for p.QueueLen() > 0 || p.PendingBytes() > 0 {
		if time.Now().After(deadline) {
			tb.Fatalf("not shipped: %d queued, %d bytes pending", p.QueueLen(), p.PendingBytes())
		}
		time.Sleep(time.Millisecond)
	}
}

// ackAll stands in for the aggregator: it acknowledges every segment of
// a batch.
func ackAll(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	ack := ingest.ShipAck{Acked: []ingest.SegmentRef{}}
	err := ingest.ReadBatch(body, r.Header.Get("Content-Encoding"), 64<<20, func(s ingest.BatchSegment) error {
		ack.Acked = append(ack.Acked, s.Ref)
		return nil
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	_ = json.NewEncoder(w).Encode(ack)
}
