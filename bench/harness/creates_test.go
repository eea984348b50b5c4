package harness

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// fakeCreates serves POST /v1/links: 201 with a Location for each create,
// or answers status for every request when status is not zero; every
// tooMany-th request gets 429 when tooMany is not zero.
func fakeCreates(t *testing.T, status int, tooMany int64) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		i := n.Add(1)
		switch {
		case string(ctx.Method()) != "POST" || string(ctx.Path()) != "/v1/links" || !strings.HasPrefix(string(ctx.Request.Header.Peek("Authorization")), "Bearer k"):
			ctx.SetStatusCode(fasthttp.StatusBadRequest)
		case status != 0:
			ctx.SetStatusCode(status)
			ctx.SetBodyString(`{"type":"/problems/internal"}`)
		case tooMany > 0 && i%tooMany == 0:
			ctx.SetStatusCode(fasthttp.StatusTooManyRequests)
		default:
			ctx.SetStatusCode(fasthttp.StatusCreated)
			ctx.Response.Header.Set("Location", fmt.Sprintf("http://x/v1/links/c%06d", i))
			ctx.SetBodyString(fmt.Sprintf(`{"code":"c%06d"}`, i))
		}
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	return ln.Addr().String(), &n
}

func TestRunCreatesWindow(t *testing.T) {
	addr, _ := fakeCreates(t, 0, 0)
	res, err := RunCreates(context.Background(), CreateLoadConfig{
		Addr: addr, APIKeys: []string{"k1", "k2"}, Conns: 4,
		Warmup: 100 * time.Millisecond, Duration: 300 * time.Millisecond, KeepEvery: 10,
	})
	if err != nil {
		t.Fatalf("RunCreates: %v", err)
	}
	if res.Created == 0 || res.Errors() != 0 || res.PerSecond() <= 0 {
		t.Fatalf("got %d created, %d errors, %.0f/s; want > 0, 0, > 0", res.Created, res.Errors(), res.PerSecond())
	}
	if res.Unmeasured == 0 {
		t.Errorf("Unmeasured = 0; want the warmup's creates counted")
	}
	if got := res.Latency.Count(); got != res.Created {
		t.Errorf("histogram holds %d; want %d", got, res.Created)
	}
	if len(res.Codes) == 0 || !strings.HasPrefix(res.Codes[0], "c") {
		t.Errorf("Codes = %.3q; want codes taken from Location", res.Codes)
	}
}

func TestRunCreatesCountCountsRateLimits(t *testing.T) {
	addr, _ := fakeCreates(t, 0, 7)
	var progress strings.Builder
	res, err := RunCreates(context.Background(), CreateLoadConfig{
		Addr: addr, APIKeys: []string{"k1"}, Conns: 3, Count: 200, Duration: 20 * time.Second, Progress: &progress,
	})
	if err != nil {
		t.Fatalf("RunCreates: %v", err)
	}
	if res.Created < 200 || res.Created > 202 {
		t.Errorf("created %d; want 200 to 202 (one in flight per worker may land)", res.Created)
	}
	if res.Statuses[429] == 0 || res.BadStatus != res.Statuses[429] {
		t.Errorf("statuses %v; want the 429s counted as bad", res.Statuses)
	}
	if got := strings.Count(progress.String(), "\n"); got != 10 {
		t.Errorf("got %d progress lines; want 10:\n%s", got, progress.String())
	}
}

func TestRunCreatesStopsAfterFailuresInRow(t *testing.T) {
	addr, n := fakeCreates(t, fasthttp.StatusInternalServerError, 0)
	res, err := RunCreates(context.Background(), CreateLoadConfig{
		Addr: addr, APIKeys: []string{"k1"}, Conns: 2, Duration: time.Minute, MaxFailuresInRow: 5,
	})
	if err == nil || !strings.Contains(err.Error(), "status 500") {
		t.Fatalf("RunCreates against a failing node: got %v; want an error naming status 500", err)
	}
	if res == nil || res.BadStatus < 5 || res.Created != 0 || n.Load() > 50 {
		t.Errorf("got %+v after %d requests; want >= 5 bad, 0 created, a quick stop", res, n.Load())
	}
}
