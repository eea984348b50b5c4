package edge

import (
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/store"
)

// benchServer is a server over real Pebble without a listener: benchmarks
// call the handler on a reused RequestCtx, which is what fasthttp does.
func benchServer(tb testing.TB, cfg Config) (*Server, *testWriter) {
	tb.Helper()
	st := openStore(tb)
	w := newTestWriter(tb, st)
	cfg.PublicURL = "http://127.0.0.1:8080"
	cfg.Logger = discardLogger()
	srv, err := New(cfg, st, w)
	if err != nil {
		tb.Fatal(err)
	}
	w.srv = srv
	w.putLink(tb, store.Link{Code: "abc1234", URL: "https://example.com/some/long/path?utm_source=bench&x=%2F#frag", Owner: "o"})
	return srv, w
}

func requestCtx(method, path string) *fasthttp.RequestCtx {
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetRequestURI(path)
	return ctx
}

// serveOnce runs h as fasthttp would for one request on a kept-alive ctx.
func serveOnce(h fasthttp.RequestHandler, ctx *fasthttp.RequestCtx, want int) bool {
	ctx.Response.Reset()
	h(ctx)
	return ctx.Response.StatusCode() == want
}

func BenchmarkRedirectCacheHit(b *testing.B) {
	srv, _ := benchServer(b, Config{})
	benchServe(b, srv.Handler(), "/abc1234", 302)
}

func BenchmarkRedirectPebble(b *testing.B) {
	srv, _ := benchServer(b, Config{})
	h := srv.Handler()
	ctx := requestCtx("GET", "/abc1234")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		srv.Invalidate("abc1234")
		if !serveOnce(h, ctx, 302) {
			b.Fatalf("status: got %d; want 302", ctx.Response.StatusCode())
		}
	}
}

func BenchmarkRedirectNotFound(b *testing.B) {
	srv, _ := benchServer(b, Config{})
	benchServe(b, srv.Handler(), "/zzzzzzz", 404)
}

func BenchmarkRedirectCacheHitParallel(b *testing.B) {
	srv, _ := benchServer(b, Config{})
	h := srv.Handler()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := requestCtx("GET", "/abc1234")
		for pb.Next() {
			serveOnce(h, ctx, 302)
		}
	})
}

// TestRedirectHitAllocatesNothing keeps the hot-path promise from
// regressing: a cache hit, with or without an expiry, and a negative hit.
func TestRedirectHitAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	srv, w := benchServer(t, Config{})
	now := srv.now()
	w.putLink(t, store.Link{Code: "expires", URL: "https://example.com/e", Owner: "o", ExpiresAt: now.Add(1e12).UnixMilli()})
	checkNoAllocs(t, srv.Handler(), []pathStatus{{"/abc1234", 302}, {"/expires", 302}, {"/zzzzzzz", 404}})
}

// BenchmarkRedirectCacheHitBlocklist is a cache hit with 10,000 block
// entries and a prefix in the snapshot.
func BenchmarkRedirectCacheHitBlocklist(b *testing.B) {
	srv, w := benchServer(b, Config{})
	w.blocklist(b, bigBlocklist(10000)...)
	w.blocklist(b, blockEntry("10.0.0.0/8"))
	benchServe(b, srv.Handler(), "/abc1234", 302)
}

// benchServe primes the cache with one request for path, then measures
// that request in a loop.
func benchServe(b *testing.B, h fasthttp.RequestHandler, path string, status int) {
	b.Helper()
	ctx := requestCtx("GET", path)
	if !serveOnce(h, ctx, status) {
		b.Fatalf("%s: status %d; want %d", path, ctx.Response.StatusCode(), status)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		serveOnce(h, ctx, status)
	}
}

type pathStatus struct {
	path   string
	status int
}

// checkNoAllocs fails unless each request, after a first one that fills
// the cache, allocates nothing.
func checkNoAllocs(t *testing.T, h fasthttp.RequestHandler, cases []pathStatus) {
	t.Helper()
	for _, tt := range cases {
		ctx := requestCtx("GET", tt.path)
		serveOnce(h, ctx, tt.status)
		allocs := testing.AllocsPerRun(100, func() {
			if !serveOnce(h, ctx, tt.status) {
				t.Fatalf("%s: status %d; want %d", tt.path, ctx.Response.StatusCode(), tt.status)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: got %v allocs per request; want 0", tt.path, allocs)
		}
	}
}
