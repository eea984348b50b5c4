package edge

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/waymark/waymark/store"
)

// BenchmarkGCWithCachedLinks is one full garbage collection with the
// redirect cache holding n links (one heap object each, with pointers the
// collector follows): what the cache adds to every GC cycle, the question
// for a pointer-free slab. ns/op is the whole runtime.GC(), stop and
// concurrent mark included, on the benchmark's cores.
func BenchmarkGCWithCachedLinks(b *testing.B) {
	for _, n := range []int{0, 100_000, 1_000_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			srv, _ := benchServer(b, Config{CacheEntries: 1 << 21})
			var buf [7]byte
			for i := range uint32(n) {
				code := benchCode(&buf, i)
				l := store.Link{Code: string(code), URL: "https://example.com/some/path/" + strconv.Itoa(int(i)) + "?utm_source=bench", Owner: "o", Redirect: 302}
				srv.cache.add(srv.cache.generation(code), srv.buildEntry([]byte(code), &l))
			}
			if got := srv.cache.len(); got < int64(n*9/10) {
				b.Fatalf("cached %d of %d", got, n)
			}
			runtime.GC()
			b.ResetTimer()
			for b.Loop() {
				runtime.GC()
			}
			runtime.KeepAlive(srv)
		})
	}
}
