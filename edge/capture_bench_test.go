package edge_test

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/edge"
	"github.com/waymark/waymark/ingest"
)

// The redirect hot path with click capture on, as the node wires it
// (edge.Config.OnRedirect = ingest.Pipeline.CaptureClick): the redirect
// from the cache, then the click copied into the capture queue, on a
// request that carries what real clicks carry.

func captureServer(tb testing.TB) (fasthttp.RequestHandler, *ingest.Pipeline) {
	tb.Helper()
	p, err := ingest.Open(ingest.Config{
		Dir: tb.TempDir(), NodeID: "bench", Region: "eu",
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Metrics:        metrics.NewSet(),
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Close(context.Background()) })
	srv := edge.NewBenchServer(tb, edge.Config{OnRedirect: p.CaptureClick})
	return srv.Handler(), p
}

func clickRequest() *fasthttp.RequestCtx {
	var req fasthttp.Request
	req.SetRequestURI("/abc1234?utm_source=news&utm_campaign=launch")
	req.Header.SetUserAgent("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36")
	req.Header.Set("Referer", "https://news.example.com/story/1?id=2")
	req.Header.Set("X-Forwarded-For", "198.51.100.7")
	ctx := &fasthttp.RequestCtx{}
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}, nil)
	return ctx
}

func serve(h fasthttp.RequestHandler, ctx *fasthttp.RequestCtx) int {
	ctx.Response.Reset()
	h(ctx)
	return ctx.Response.StatusCode()
}

// warm fills the capture pool and waits for the writer to drain it.
func warm(tb testing.TB, h fasthttp.RequestHandler, p *ingest.Pipeline, ctx *fasthttp.RequestCtx) {
	tb.Helper()
	for range 20000 {
		if got := serve(h, ctx); got != fasthttp.StatusFound {
			tb.Fatalf("status: got %d; want 302", got)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.QueueLen() > 0 {
		if time.Now().After(deadline) {
			tb.Fatal("the capture queue did not drain")
		}
		time.Sleep(time.Millisecond)
	}
}

func BenchmarkRedirectCacheHitCapture(b *testing.B) {
	h, p := captureServer(b)
	ctx := clickRequest()
	warm(b, h, p, ctx)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		serve(h, ctx)
	}
}

// TestRedirectWithCaptureAllocatesNothing: 0 allocs per redirect with
// capture on (issue 8, item 4), counted over every goroutine, the writer's
// included.
func TestRedirectWithCaptureAllocatesNothing(t *testing.T) {
	if edge.RaceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	h, p := captureServer(t)
	ctx := clickRequest()
	warm(t, h, p, ctx)
	allocs := testing.AllocsPerRun(2000, func() {
		if got := serve(h, ctx); got != fasthttp.StatusFound {
			t.Fatalf("status: got %d; want 302", got)
		}
	})
	if allocs != 0 {
		t.Errorf("got %v allocs per redirect with capture; want 0", allocs)
	}
	if p.Dropped(ingest.DropQueueFull) != 0 {
		t.Errorf("dropped %d clicks as queue_full", p.Dropped(ingest.DropQueueFull))
	}
}
