package edge

import "testing"

// BenchmarkRedirectCacheHitSuspendedOther is a cache hit while some other
// owner is suspended: the set is not empty, so the hit pays a map lookup
// of its owner, and still allocates nothing.
func BenchmarkRedirectCacheHitSuspendedOther(b *testing.B) {
	set := NewOwnerSet()
	for _, o := range []string{"spammer-1", "spammer-2", "spammer-3"} {
		set.Set(o, true)
	}
	srv, _ := benchServer(b, Config{SuspendedOwners: set})
	benchServe(b, srv.Handler(), "/abc1234", 302)
}

// BenchmarkRedirectCacheHitSuspendedOwner is a cache hit on a link of a
// suspended owner: the 410 page, without an allocation.
func BenchmarkRedirectCacheHitSuspendedOwner(b *testing.B) {
	set := NewOwnerSet()
	srv, _ := benchServer(b, Config{SuspendedOwners: set})
	h := srv.Handler()
	if ctx := requestCtx("GET", "/abc1234"); !serveOnce(h, ctx, 302) { // cached as a redirect
		b.Fatalf("status: got %d; want 302", ctx.Response.StatusCode())
	}
	set.Set("o", true)
	benchServe(b, h, "/abc1234", 410)
}
