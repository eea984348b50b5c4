package ingest

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/VictoriaMetrics/metrics"
)

// benchWriter measures the writer's cost per event: enrichment, visitor
// hash, encoding and the write(2) of each batch, for clicks from visitors
// distinct (user agent, address) pairs. Clicks are captured into pending
// events with the timer stopped, a batch at a time, then written as the
// writer goroutine writes them.
func benchWriter(b *testing.B, visitors int) {
	p, err := newPipeline(Config{
		Dir: b.TempDir(), NodeID: "node-a", Region: "eu",
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Logger:         testLogger(b), Metrics: metrics.NewSet(),
	})
	if err != nil {
		b.Fatal(err)
	}
	p.seg.syncer.start()
	defer p.enrich.close()
	defer func() { _ = p.seg.close(); p.seg.syncer.stop() }()
	uas := distinctUAs(visitors)
	ctx := clickCtx("http://wm.example/aB3dE7x?utm_source=news", "127.0.0.1",
		map[string]string{"Referer": "https://news.example.com/story"})
	code := []byte("aB3dE7x")
	const batch = 4096
	pes := make([]*pending, batch)
	next := 0
	fill := func(n int) {
		for i := range n {
			v := next % visitors
			next++
			ctx.Request.Header.SetUserAgentBytes(uas[v])
			ctx.Request.Header.Set("X-Forwarded-For", fmt.Sprintf("198.18.%d.%d", v/250, v%250+1))
			pe := p.pool.Get().(*pending)
			p.captureInto(pe, ctx, code)
			pes[i] = pe
		}
	}
	// Warm up: every visitor seen once, as after the first seconds of load.
	for done := 0; done < visitors; done += batch {
		n := min(batch, visitors-done)
		fill(n)
		for _, pe := range pes[:n] {
			p.write(pe)
		}
		p.handleErr(p.seg.flush())
	}
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += batch {
		n := min(batch, b.N-done)
		b.StopTimer()
		fill(n)
		b.StartTimer()
		for _, pe := range pes[:n] {
			p.write(pe)
		}
		p.handleErr(p.seg.flush())
	}
	b.StopTimer()
	if p.Dropped(DropIOError) != 0 || p.Dropped(DropDiskCap) != 0 {
		b.Fatalf("dropped events while writing")
	}
}

func BenchmarkWriterDistinctVisitors(b *testing.B) { benchWriter(b, 20_000) }

// BenchmarkWriterOneVisitor is the same load from one visitor, the
// baseline for the ratio.
func BenchmarkWriterOneVisitor(b *testing.B) { benchWriter(b, 1) }
