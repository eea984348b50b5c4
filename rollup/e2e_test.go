package rollup

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/ingest"
)

// TestShippedByIngestPipeline runs the real edge side: clicks captured by
// an ingest.Pipeline, written to segment files, shipped by its shipper
// over loopback HTTP, stored here exactly once and deleted on the edge
// once acknowledged.
func TestShippedByIngestPipeline(t *testing.T) {
	cfg := testConfig(t, t.TempDir(), &testClock{})
	cfg.Now = time.Now // the pipeline stamps events with the real clock
	a := openTest(t, cfg)
	srv := startServer(t, a)

	p, err := ingest.Open(ingest.Config{
		Dir:           t.TempDir(),
		NodeID:        "edge-e2e",
		Region:        "eu",
		SegmentMaxAge: 50 * time.Millisecond,
		SyncInterval:  10 * time.Millisecond,
		AggregatorURL: srv.url,
		ShipToken:     testToken,
		Logger:        slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatalf("ingest.Open: %v", err)
	}
	defer p.Close(context.Background())

	const clicks = 50
	for range clicks {
		var req fasthttp.Request
		req.SetRequestURI("/abc?utm_source=news")
		req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0")
		var ctx fasthttp.RequestCtx
		ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}, nil)
		p.CaptureClick(&ctx, []byte("abc"))
	}

	deadline := time.Now().Add(15 * time.Second)
	for mustCount(t, a, Filter{Code: "abc"}) < clicks || p.PendingBytes() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after 15s: %d clicks stored, %d bytes pending on the edge; want %d and 0",
				mustCount(t, a, Filter{Code: "abc"}), p.PendingBytes(), clicks)
		}
		time.Sleep(20 * time.Millisecond)
	}
	wantCount(t, a, Filter{}, clicks)
	evs, err := a.Tail(1, Filter{})
	if err != nil || len(evs) != 1 {
		t.Fatalf("Tail: got %d events (err %v); want 1", len(evs), err)
	}
	if ev := evs[0]; ev.Code != "abc" || ev.Node != "edge-e2e" || ev.UTMSource != "news" {
		t.Errorf("stored click: got code %q node %q utm_source %q; want abc, edge-e2e, news", ev.Code, ev.Node, ev.UTMSource)
	}
}
