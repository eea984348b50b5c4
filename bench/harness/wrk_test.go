package harness

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

func TestRunWrkWithVisitors(t *testing.T) {
	requireTool(t, func() error { _, err := FindWrk(""); return err })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var served, missing uint64
	pairs := map[string]string{}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		mu.Lock()
		served++
		pairs[string(ctx.Request.Header.Peek("X-Forwarded-For"))] = string(ctx.UserAgent())
		mu.Unlock()
		if string(ctx.Path()) == "/missing" {
			mu.Lock()
			missing++
			mu.Unlock()
			ctx.SetStatusCode(404)
			return
		}
		BaselineHandler(ctx)
	}}
	go srv.Serve(ln)
	defer srv.Shutdown()

	dir := t.TempDir()
	vs, err := MakeVisitors(30)
	if err != nil {
		t.Fatal(err)
	}
	reqs := filepath.Join(dir, "reqs.tsv")
	if err := WrkRequests(reqs, [][]byte{[]byte("/a"), []byte("/b"), []byte("/missing")}, vs, 1000, 1); err != nil {
		t.Fatal(err)
	}
	var startAt, endAt time.Time
	res, err := RunWrk(context.Background(), WrkConfig{
		Dir: dir, Addr: ln.Addr().String(), Requests: reqs, Conns: 4, Duration: 700 * time.Millisecond, // wrk rounds up to 1 s
		AtStart: func() { startAt = time.Now() }, AtEnd: func() { endAt = time.Now() },
	})
	if err != nil {
		t.Fatalf("RunWrk: %v", err)
	}
	if d := endAt.Sub(startAt); d < 950*time.Millisecond || d > 5*time.Second {
		t.Errorf("hooks %v apart; want about the 1 s run", d)
	}
	if d := res.Elapsed(); d < 950*time.Millisecond || d > 2*time.Second {
		t.Errorf("wrk ran %v; want about 1 s", d)
	}
	mu.Lock()
	defer mu.Unlock()
	if res.Requests == 0 || res.Requests > served || served-res.Requests > 4 {
		t.Errorf("wrk counted %d answers, the server gave %d; want them equal but for the %d in flight at the end", res.Requests, served, 4)
	}
	if res.StatusErrors == 0 || res.StatusErrors > missing || res.OK() == 0 {
		t.Errorf("wrk counted %d status errors and %d ok; the server answered %d 404s", res.StatusErrors, res.OK(), missing)
	}
	if res.P50Micros <= 0 || res.P99Micros < res.P50Micros || res.RPS() <= 0 {
		t.Errorf("p50 %v, p99 %v, %v req/s; want 0 < p50 <= p99 and a rate", res.P50Micros, res.P99Micros, res.RPS())
	}
	want := map[string]string{}
	for _, v := range vs {
		want[string(v.ForwardedFor)] = string(v.UserAgent)
	}
	if len(pairs) < 20 {
		t.Errorf("server saw %d visitors; want most of 30", len(pairs))
	}
	for ip, ua := range pairs {
		if want[ip] != ua {
			t.Errorf("visitor %q came with user agent %q; want %q", ip, ua, want[ip])
		}
	}
	if f := res.Figures(); f.Errors != res.StatusErrors || f.OK != res.OK() {
		t.Errorf("figures %+v do not match the result %+v", f, res)
	}
}

func TestRunWrkReportsItsCPU(t *testing.T) {
	requireTool(t, func() error { _, err := FindWrk(""); return err })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewBaselineServer()
	go srv.Serve(ln)
	defer srv.Shutdown()
	dir := t.TempDir()
	reqs := filepath.Join(dir, "reqs")
	if err := WrkRequests(reqs, [][]byte{[]byte("/a")}, nil, 10, 1); err != nil {
		t.Fatal(err)
	}
	res, err := RunWrk(context.Background(), WrkConfig{Dir: dir, Addr: ln.Addr().String(), Requests: reqs, Conns: 2, Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// A closed loop on loopback keeps wrk busy for a good part of its second.
	if res.CPU <= 50*time.Millisecond || res.CPU > 1500*time.Millisecond {
		t.Errorf("wrk's CPU over a 1 s run: %v; want well above 0 and at most about 1 s", res.CPU)
	}
}
