package harness

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestRunLoadAgainstBaselineChildren drives two real baseline processes for
// about a second each, as the redirect benchmark does with baseline and node.
func TestRunLoadAgainstBaselineChildren(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	paths := [][]byte{[]byte("/aaaaaaa"), []byte("/bbbbbbb"), []byte("/ccccccc")}
	for _, name := range []string{"first", "second"} {
		cfg := baselineChildConfig(t)
		cfg.Name = name
		child, addr, err := StartBaselineChild(ctx, cfg)
		if err != nil {
			t.Fatalf("StartBaselineChild(%s): %v", name, err)
		}
		defer child.Stop()
		res, err := RunLoad(ctx, LoadConfig{
			Addr: addr, Paths: paths, Conns: 8,
			Warmup: 200 * time.Millisecond, Duration: 800 * time.Millisecond,
		})
		if err != nil {
			t.Fatalf("RunLoad(%s): %v", name, err)
		}
		if res.OK == 0 || res.RPS() <= 0 {
			t.Errorf("%s: got %d ok, %.0f req/s; want > 0", name, res.OK, res.RPS())
		}
		if res.Errors() != 0 {
			t.Errorf("%s: got %d errors (%s, first %q); want 0", name, res.Errors(), res.StatusSummary(), res.FirstError)
		}
		if got := res.Latency.Count(); got != res.OK {
			t.Errorf("%s: histogram holds %d; want %d", name, got, res.OK)
		}
		if p50, p99 := res.Latency.Quantile(0.5), res.Latency.Quantile(0.99); p50 <= 0 || p99 < p50 {
			t.Errorf("%s: p50 %v, p99 %v; want 0 < p50 <= p99", name, p50, p99)
		}
		if err := child.Stop(); err != nil {
			t.Errorf("Stop(%s): %v", name, err)
		}
	}
}

func TestRunLoadEachOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		mu.Lock()
		seen[string(ctx.Path())]++
		mu.Unlock()
		BaselineHandler(ctx)
	}}
	go srv.Serve(ln)
	defer srv.Shutdown()
	var paths [][]byte
	for i := range 500 {
		paths = append(paths, fmt.Appendf(nil, "/p%d", i))
	}
	res, err := RunLoad(context.Background(), LoadConfig{
		Addr: ln.Addr().String(), Paths: paths, Conns: 4,
		Warmup: time.Hour, Duration: time.Minute, EachOnce: true,
	})
	if err != nil {
		t.Fatalf("RunLoad: %v", err)
	}
	if res.OK != uint64(len(paths)) || res.Errors() != 0 {
		t.Errorf("got ok %d, errors %d; want %d, 0", res.OK, res.Errors(), len(paths))
	}
	if res.Elapsed <= 0 || res.Elapsed >= time.Minute {
		t.Errorf("Elapsed = %v; want the pass's own length", res.Elapsed)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range paths {
		if n := seen[string(p)]; n != 1 {
			t.Errorf("%s requested %d times; want 1", p, n)
		}
	}
}

func TestRunLoadCountsWrongStatusAsError(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := baselineChildConfig(t)
	child, addr, err := StartBaselineChild(ctx, cfg)
	if err != nil {
		t.Fatalf("StartBaselineChild: %v", err)
	}
	defer child.Stop()
	res, err := RunLoad(ctx, LoadConfig{
		Addr: addr, Paths: [][]byte{[]byte("/x")}, Conns: 2,
		Duration: 200 * time.Millisecond, WantStatus: 200,
	})
	if err != nil {
		t.Fatalf("RunLoad: %v", err)
	}
	if res.OK != 0 || res.BadStatus == 0 || res.Statuses[302] != res.BadStatus {
		t.Errorf("got ok %d, bad %d, statuses %s; want every 302 counted as bad", res.OK, res.BadStatus, res.StatusSummary())
	}
	if res.FirstError != "status 302" {
		t.Errorf("FirstError = %q; want %q", res.FirstError, "status 302")
	}
}

func TestRunLoadTransportErrors(t *testing.T) {
	// Nothing listens on port 1 of loopback: every request fails to connect.
	res, err := RunLoad(context.Background(), LoadConfig{
		Addr: "127.0.0.1:1", Paths: [][]byte{[]byte("/x")}, Conns: 1,
		Duration: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("RunLoad: %v", err)
	}
	if res.TransportErrors == 0 || res.OK != 0 || res.FirstError == "" {
		t.Errorf("got transport errors %d, ok %d, first %q; want only transport errors", res.TransportErrors, res.OK, res.FirstError)
	}
}

func BenchmarkRunLoadWorker(b *testing.B) {
	b.ReportAllocs()
	cfg := baselineChildConfig(b)
	child, addr, err := StartBaselineChild(context.Background(), cfg)
	if err != nil {
		b.Fatalf("StartBaselineChild: %v", err)
	}
	defer child.Stop()
	b.ResetTimer()
	res, err := RunLoad(context.Background(), LoadConfig{
		Addr: addr, Paths: [][]byte{[]byte("/x")}, Conns: 1, Duration: time.Second,
	})
	if err != nil {
		b.Fatalf("RunLoad: %v", err)
	}
	b.ReportMetric(res.RPS(), "req/s")
}

func TestRunLoadReadsErrorBodies(t *testing.T) {
	// An error page has a body; the generator must read it, or the next
	// answer on that connection would be garbage.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/missing" {
			ctx.SetStatusCode(fasthttp.StatusNotFound)
			ctx.SetBodyString("<html>no such link, sorry</html>")
			return
		}
		BaselineHandler(ctx)
	}}
	go srv.Serve(ln)
	defer srv.Shutdown()
	res, err := RunLoad(context.Background(), LoadConfig{
		Addr: ln.Addr().String(), Paths: [][]byte{[]byte("/missing"), []byte("/abc")}, Conns: 2,
		Duration: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("RunLoad: %v", err)
	}
	if res.TransportErrors != 0 || res.OK == 0 || res.BadStatus != res.Statuses[404] || res.BadStatus == 0 {
		t.Errorf("got ok %d, statuses %s, transport errors %d (%q); want 302s and 404s only", res.OK, res.StatusSummary(), res.TransportErrors, res.FirstError)
	}
}
