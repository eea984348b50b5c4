package edge

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waymark/waymark/store"
)

// leaderDouble answers read-your-writes lookups as a leader would, from a
// second real store, counting the calls and holding each for a while so
// concurrent misses overlap.
type leaderDouble struct {
	st    *store.Store
	calls atomic.Int64
	hold  time.Duration
}

func (l *leaderDouble) link(ctx context.Context, code string) (store.Link, bool, error) {
	l.calls.Add(1)
	time.Sleep(l.hold)
	var out store.Link
	found, err := l.st.GetLink([]byte(code), &out)
	return out, found, err
}

// Concurrent misses on one code share one leader lookup; the leader's
// "no such code" is remembered, and forgotten when the code is applied
// here.
func TestRemoteLookupsSharedAndNegativeCached(t *testing.T) {
	leader := &leaderDouble{st: openStore(t), hold: 50 * time.Millisecond}
	e := newEnv(t, func(c *Config) {
		c.CacheEntries = -1 // the redirect cache would hide the lookups
		c.Remote = leader.link
		c.MaybeFresh = func([]byte) bool { return true }
		c.RemoteTimeout = time.Second
	})
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := e.do("GET", "/some-alias", "", ""); r.status != 404 {
				t.Errorf("unknown alias: got %d; want 404", r.status)
			}
		}()
	}
	wg.Wait()
	if n := leader.calls.Load(); n != 1 {
		t.Fatalf("8 concurrent misses on one alias: %d leader lookups; want 1", n)
	}
	for i := 0; i < 5; i++ {
		e.do("GET", "/some-alias", "", "")
	}
	if n := leader.calls.Load(); n != 1 {
		t.Fatalf("repeated misses: %d leader lookups; want 1 (negative cache)", n)
	}
	// The code appears here: the remembered miss is dropped with it.
	e.w.putLink(t, store.Link{Code: "some-alias", URL: "https://example.com/appeared", Owner: "alice", Status: store.StatusActive})
	if r := e.do("GET", "/some-alias", "", ""); r.status != 302 {
		t.Fatalf("applied alias: got %d; want 302", r.status)
	}
	if e.srv.gate.linkMiss.has("some-alias", e.clock.Now()) {
		t.Fatal("the leader's miss is still remembered after the code was applied")
	}
}
