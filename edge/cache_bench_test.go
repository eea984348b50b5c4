package edge

import (
	"strconv"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/waymark/waymark/store"
)

// benchCode writes the i-th of the benchmarks' 7-character codes into
// dst. Codes are computed rather than read from a table, so a benchmark's
// own memory reads do not add to the cache misses it measures.
func benchCode(dst *[7]byte, i uint32) []byte {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	x := uint64(i)*0x9E3779B97F4A7C15 | 1
	for j := range dst {
		dst[j] = alphabet[x%62]
		x /= 62
	}
	dst[6] = alphabet[i%62] // with the high digits, keeps codes distinct
	return dst[:]
}

// benchOrder steps a xorshift generator: the random request order.
func benchOrder(x *uint32) uint32 {
	*x ^= *x << 13
	*x ^= *x >> 17
	*x ^= *x << 5
	return *x
}

// BenchmarkCacheGet100k reads random codes from a cache holding 100,000,
// more than the CPU caches keep, as on a node under the redirect benchmark.
func BenchmarkCacheGet100k(b *testing.B) {
	const n = 100_000
	c := newCache(defaultCacheEntries, metrics.NewSet())
	var buf [7]byte
	for i := range uint32(n) {
		code := benchCode(&buf, i)
		c.add(c.generation(code), &entry{code: string(code), location: []byte("https://example.com/" + string(code))})
	}
	if c.len() != n {
		b.Fatalf("cached: got %d; want %d", c.len(), n)
	}
	b.ReportAllocs()
	x := uint32(1)
	for b.Loop() {
		if c.get(benchCode(&buf, benchOrder(&x)%n)) == nil {
			b.Fatal("miss")
		}
	}
}

// BenchmarkRedirectCacheHit100k is BenchmarkRedirectCacheHit over 100,000
// cached links requested in random order.
func BenchmarkRedirectCacheHit100k(b *testing.B) {
	srv, _ := benchServer(b, Config{})
	const n = 100_000
	var buf [7]byte
	for i := range uint32(n) {
		code := benchCode(&buf, i)
		l := store.Link{Code: string(code), URL: "https://example.com/some/path/" + strconv.Itoa(int(i)) + "?utm_source=bench", Owner: "o", Redirect: 302}
		srv.cache.add(srv.cache.generation(code), srv.buildEntry([]byte(code), &l))
	}
	h := srv.Handler()
	ctx := requestCtx("GET", "/abc1234")
	path := make([]byte, 0, 16)
	b.ReportAllocs()
	x := uint32(1)
	for b.Loop() {
		path = append(append(path[:0], '/'), benchCode(&buf, benchOrder(&x)%n)...)
		ctx.Request.SetRequestURIBytes(path)
		if !serveOnce(h, ctx, 302) {
			b.Fatalf("status: got %d; want 302", ctx.Response.StatusCode())
		}
	}
}
