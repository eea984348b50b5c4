package edge

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"
	"golang.org/x/sync/singleflight"

	"github.com/waymark/waymark/store"
)

// A local miss on a code or an API key may be something created a moment
// ago in another region, so the edge asks the leader (read-your-writes).
// Left alone, that turns every random alias-shaped path and every random
// bearer token into a request to the leader. The remoteGate bounds what
// misses can cost it:
//   - identical lookups in flight share one request (singleflight);
//   - the leader's "no such code/key" is remembered for a short while
//     (bounded; an entry only matters while the local replica still lacks
//     the code or key, and Invalidate drops a code's entry when it is
//     applied here);
//   - each client address gets a small token bucket of lookups, and all
//     clients together a larger one;
//   - at most remoteConcurrency lookups are in flight at once.
// A lookup the gate refuses is answered from the local replica alone: the
// worst case for a real, just-created code is a 404 until this replica
// applies it, which is what a node without the fallback would answer.

const (
	remoteClientRate  = 5   // lookups per second per client address...
	remoteClientBurst = 20  // ...with this burst
	remoteGlobalRate  = 100 // lookups per second from this node in all...
	remoteGlobalBurst = 200
	remoteConcurrency = 16 // lookups in flight at once
	remoteMissTTL     = 2 * time.Second
	remoteMissMax     = 10000
)

// clientKey is a client's IP address, 16 bytes (IPv4 mapped).
type clientKey [16]byte

// noClient marks a lookup whose client is not known (the stats API's
// authorizer); only the global limits apply to it.
var noClient clientKey

func clientOf(ctx *fasthttp.RequestCtx) clientKey {
	var k clientKey
	if ip := ctx.RemoteIP().To16(); ip != nil {
		copy(k[:], ip)
	}
	return k
}

// errGateBusy means every lookup slot was taken.
var errGateBusy = errors.New("too many leader lookups in flight")

type remoteGate struct {
	now       func() time.Time
	perClient *limiter[clientKey]
	global    *limiter[struct{}]
	slots     chan struct{}
	links     singleflight.Group
	owners    singleflight.Group
	linkMiss  *missCache
	ownerMiss *missCache

	limited, negative, busy, shared *metrics.Counter
}

func newRemoteGate(now func() time.Time, set *metrics.Set) *remoteGate {
	skipped := func(reason string) *metrics.Counter {
		return set.GetOrCreateCounter(`waymark_edge_remote_lookups_skipped_total{reason="` + reason + `"}`)
	}
	return &remoteGate{
		now:       now,
		perClient: newLimiter[clientKey](remoteClientRate, remoteClientBurst, now),
		global:    newLimiter[struct{}](remoteGlobalRate, remoteGlobalBurst, now),
		slots:     make(chan struct{}, remoteConcurrency),
		linkMiss:  newMissCache(remoteMissTTL, remoteMissMax),
		ownerMiss: newMissCache(authCacheTTL, remoteMissMax),
		limited:   skipped("rate_limited"),
		negative:  skipped("negative_cache"),
		busy:      skipped("busy"),
		shared:    set.GetOrCreateCounter("waymark_edge_remote_lookups_shared_total"),
	}
}

// admit takes the rate tokens for one lookup by client.
func (g *remoteGate) admit(client clientKey) bool {
	if client != noClient {
		if ok, _ := g.perClient.allow(client); !ok {
			g.limited.Inc()
			return false
		}
	}
	if ok, _ := g.global.allow(struct{}{}); !ok {
		g.limited.Inc()
		return false
	}
	return true
}

// do runs one lookup under key (at most one in flight per key), in a slot,
// with the given deadline. miss is the negative cache for its kind.
func (g *remoteGate) do(group *singleflight.Group, miss *missCache, key string, client clientKey, wait time.Duration,
	fn func(ctx context.Context) (any, bool, error)) (any, bool, error) {
	if miss.has(key, g.now()) {
		g.negative.Inc()
		return nil, false, nil
	}
	if !g.admit(client) {
		return nil, false, nil
	}
	type result struct {
		v     any
		found bool
	}
	v, err, shared := group.Do(key, func() (any, error) {
		select {
		case g.slots <- struct{}{}:
		default:
			g.busy.Inc()
			return result{}, errGateBusy
		}
		defer func() { <-g.slots }()
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		v, found, err := fn(ctx)
		if err == nil && !found {
			miss.add(key, g.now())
		}
		return result{v, found}, err
	})
	if shared {
		g.shared.Inc()
	}
	r, _ := v.(result)
	return r.v, r.found, err
}

// missCache remembers keys the leader did not know, until ttl passes.
type missCache struct {
	ttl time.Duration
	max int

	mu sync.Mutex
	m  map[string]time.Time
}

func newMissCache(ttl time.Duration, max int) *missCache {
	return &missCache{ttl: ttl, max: max, m: make(map[string]time.Time)}
}

func (c *missCache) has(key string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	until, ok := c.m[key]
	if ok && !now.Before(until) {
		delete(c.m, key)
		return false
	}
	return ok
}

func (c *missCache) add(key string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		for k, until := range c.m {
			if !now.Before(until) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= c.max {
			clear(c.m) // all fresh: a flood; forgetting costs only lookups the limits bound
		}
	}
	c.m[key] = now.Add(c.ttl)
}

func (c *missCache) forget(key string) {
	c.mu.Lock()
	delete(c.m, key)
	c.mu.Unlock()
}

// forgetAll drops every remembered miss: a snapshot restore may have
// added any code or key.
func (c *missCache) forgetAll() {
	c.mu.Lock()
	clear(c.m)
	c.mu.Unlock()
}

// remoteLink asks the leader for a code this replica does not have.
func (s *Server) remoteLink(code string, client clientKey) (store.Link, bool) {
	if s.remote == nil {
		return store.Link{}, false
	}
	v, found, err := s.gate.do(&s.gate.links, s.gate.linkMiss, code, client, s.remoteWait, func(ctx context.Context) (any, bool, error) {
		s.m.remoteLookups.Inc()
		l, found, err := s.remote(ctx, code)
		return l, found, err
	})
	if err != nil {
		s.m.remoteErrors.Inc()
		s.log.Debug("read-your-writes lookup failed", "code", code, "err", err)
		return store.Link{}, false
	}
	if !found {
		return store.Link{}, false
	}
	s.m.remoteHits.Inc()
	return v.(store.Link), true
}

// LookupLink reads a link from the local replica, else (through the same
// limits as the public routes) from the leader. For callers that have no
// client address, such as the stats API's authorizer.
func (s *Server) LookupLink(code string) (store.Link, bool, error) {
	var l store.Link
	found, err := s.st.GetLink([]byte(code), &l)
	if err != nil || found {
		return l, found, err
	}
	l, found = s.remoteLink(code, noClient)
	return l, found, nil
}

// LookupOwner resolves an API-key hash like the API's authentication does
// (cache, replica, then the leader through the limits).
func (s *Server) LookupOwner(h store.KeyHash) (store.Owner, bool, error) {
	o, _, found, err := s.auth.owner(h, noClient)
	if found && s.suspended.Has(o.ID) {
		return store.Owner{}, false, nil // a suspended owner's key opens nothing
	}
	return o, found, err
}
