package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestRunEventLoad drives a fake ingest server that drops every third event
// with a drop header and checks the bodies and headers it saw, and that the
// whole-run tally matches what the server counted as stored.
func TestRunEventLoad(t *testing.T) {
	var mu sync.Mutex
	var n, stored uint64
	var bad string
	visitors := map[string]bool{}
	handler := func(ctx *fasthttp.RequestCtx) {
		var ev struct{ N, U, D, R string }
		h := &ctx.Request.Header
		problem := ""
		switch {
		case string(ctx.Method()) != "POST" || string(ctx.Path()) != "/api/event":
			problem = "request line " + string(ctx.Method()) + " " + string(ctx.Path())
		case json.Unmarshal(ctx.PostBody(), &ev) != nil:
			problem = "body " + string(ctx.PostBody())
		case ev.N != "pageview" || ev.R != "https://ref.example/a" || string(h.Peek("Origin")) != "https://"+ev.D:
			problem = "event " + string(ctx.PostBody()) + " from " + string(h.Peek("Origin"))
		case string(h.ContentType()) != "text/plain" || !bytes.Contains(h.UserAgent(), []byte("Chrome/")):
			problem = "headers " + string(h.ContentType()) + " " + string(h.UserAgent())
		}
		mu.Lock()
		defer mu.Unlock()
		if problem != "" && bad == "" {
			bad = problem
		}
		visitors[string(h.Peek("X-Forwarded-For"))] = true
		n++
		ctx.SetStatusCode(fasthttp.StatusAccepted)
		if n%3 == 0 {
			ctx.Response.Header.Set(EventDroppedHeader, "rate_limit")
			return
		}
		stored++
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: handler}
	go srv.Serve(ln)
	defer srv.Shutdown()

	res, err := RunEventLoad(context.Background(), EventLoadConfig{
		Addr: ln.Addr().String(), Domains: []string{"a.example", "b.example"}, Visitors: 50,
		Conns: 4, Warmup: 50 * time.Millisecond, Duration: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("RunEventLoad: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if bad != "" {
		t.Errorf("server saw a bad request: %s", bad)
	}
	if res.Accepted != stored || res.Sent != n {
		t.Errorf("accepted %d, sent %d; want %d and %d as the server counted", res.Accepted, res.Sent, stored, n)
	}
	if res.AcceptedByDomain[0] == 0 || res.AcceptedByDomain[1] == 0 {
		t.Errorf("accepted by domain = %v; want both above 0", res.AcceptedByDomain)
	}
	if len(visitors) != 50 {
		t.Errorf("distinct X-Forwarded-For = %d; want 50", len(visitors))
	}
	if res.OK == 0 || res.Dropped["rate_limit"] == 0 || res.BadStatus != res.Dropped["rate_limit"] {
		t.Errorf("window: ok %d, bad %d, dropped %v; want ok and drops, every bad one a drop", res.OK, res.BadStatus, res.Dropped)
	}
	if got := res.Statuses[202]; got != res.OK+res.BadStatus {
		t.Errorf("202s in the window = %d; want ok+dropped = %d", got, res.OK+res.BadStatus)
	}
}

func TestEventBaselineServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewEventBaselineServer()
	go srv.Serve(ln)
	defer srv.Shutdown()
	res, err := RunEventLoad(context.Background(), EventLoadConfig{
		Addr: ln.Addr().String(), Domains: []string{"bench.example"}, Conns: 2, Duration: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("RunEventLoad: %v", err)
	}
	if res.OK == 0 || res.Errors() != 0 {
		t.Errorf("ok %d, errors %d (%s); want only accepted events", res.OK, res.Errors(), res.FirstError)
	}
}
