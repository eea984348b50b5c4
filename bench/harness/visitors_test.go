package harness

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

func TestMakeVisitorsDistinct(t *testing.T) {
	vs, err := MakeVisitors(MaxVisitors)
	if err != nil {
		t.Fatal(err)
	}
	uas, ips := map[string]bool{}, map[string]bool{}
	for _, v := range vs {
		uas[string(v.UserAgent)] = true
		ips[string(v.ForwardedFor)] = true
	}
	if len(uas) != MaxVisitors || len(ips) != MaxVisitors {
		t.Errorf("got %d distinct user agents and %d addresses; want %d each", len(uas), len(ips), MaxVisitors)
	}
	if got, want := string(vs[0].ForwardedFor), "198.18.0.0"; got != want {
		t.Errorf("first address %s; want %s", got, want)
	}
	if got, want := string(vs[MaxVisitors-1].ForwardedFor), "198.19.255.255"; got != want {
		t.Errorf("last address %s; want %s", got, want)
	}
	if _, err := MakeVisitors(MaxVisitors + 1); err == nil {
		t.Error("MakeVisitors past the range succeeded; want an error")
	}
}

// TestRunLoadVisitorsAndWindowHooks checks that requests carry a visitor's
// two headers together, that the hooks bracket the window, and that the
// whole-run totals cover at least the window.
func TestRunLoadVisitorsAndWindowHooks(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	pairs := map[string]string{}
	var served uint64
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		mu.Lock()
		pairs[string(ctx.Request.Header.Peek("X-Forwarded-For"))] = string(ctx.UserAgent())
		served++
		mu.Unlock()
		BaselineHandler(ctx)
	}}
	go srv.Serve(ln)
	defer srv.Shutdown()
	vs, err := MakeVisitors(50)
	if err != nil {
		t.Fatal(err)
	}
	var startAt, endAt time.Time
	begin := time.Now()
	res, err := RunLoad(context.Background(), LoadConfig{
		Addr: ln.Addr().String(), Paths: [][]byte{[]byte("/a")}, Conns: 4, Visitors: vs,
		Warmup: 200 * time.Millisecond, Duration: 300 * time.Millisecond,
		AtWindowStart: func() { startAt = time.Now() },
		AtWindowEnd:   func() { endAt = time.Now() },
	})
	if err != nil {
		t.Fatalf("RunLoad: %v", err)
	}
	if d := startAt.Sub(begin); d < 190*time.Millisecond || d > 400*time.Millisecond {
		t.Errorf("window start hook ran %v after the start; want about 200ms", d)
	}
	if d := endAt.Sub(startAt); d < 290*time.Millisecond || d > 500*time.Millisecond {
		t.Errorf("window end hook ran %v after the start hook; want about 300ms", d)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(pairs) < 40 {
		t.Errorf("server saw %d visitors; want most of the 50", len(pairs))
	}
	want := map[string]string{}
	for _, v := range vs {
		want[string(v.ForwardedFor)] = string(v.UserAgent)
	}
	for ip, ua := range pairs {
		if want[ip] != ua {
			t.Errorf("visitor %s came with user agent %q; want %q", ip, ua, want[ip])
		}
	}
	if res.TotalOK < res.OK || res.TotalOK != res.TotalAnswered || res.TotalAnswered != served || res.TotalUnanswered != 0 {
		t.Errorf("totals ok %d, answered %d, unanswered %d, window ok %d, server saw %d; want ok = answered = server's count >= window",
			res.TotalOK, res.TotalAnswered, res.TotalUnanswered, res.OK, served)
	}
}

func TestResponseBytesOfTheBaseline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewBaselineServer()
	go srv.Serve(ln)
	defer srv.Shutdown()
	status, size, err := ResponseBytes(ln.Addr().String(), "/abc")
	if err != nil {
		t.Fatal(err)
	}
	// By hand: "HTTP/1.1 302 Found\r\n" (20) + "Content-Length: 0\r\n" (19)
	// + "Location: https://example.com/\r\n" (32) + "Cache-Control:
	// private, max-age=60\r\n" (36) + "Date: ... GMT\r\n" (37) + "\r\n" (2).
	if status != 302 || size != 20+19+32+36+37+2 {
		t.Errorf("got status %d, %d bytes; want 302, %d", status, size, 20+19+32+36+37+2)
	}
}
