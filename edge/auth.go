package edge

import (
	"bytes"
	"context"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/store"
)

// authCacheTTL is how long a successful API-key lookup is reused. Short, so
// an owner change replicated through the log shows up quickly; long enough
// that a busy client costs one Pebble read every few seconds.
const authCacheTTL = 10 * time.Second

// authCacheMax bounds the cache; when full it is simply emptied.
const authCacheMax = 10000

// authCache maps API-key hashes to owners and scopes. Only hits are
// cached here, so a stream of bad keys cannot fill it; the leader's misses
// are remembered by the remote gate, which also bounds how often the
// leader is asked. A revoked key leaves the cache when the FSM applies the
// revoke (forget), so the TTL bounds only how stale an owner record gets.
type authCache struct {
	st  *store.Store
	now func() time.Time
	// remote asks the leader about a key this replica has not applied yet
	// (a key created a moment ago in another region); nil on one node.
	remote     func(ctx context.Context, h store.KeyHash) (store.Owner, store.APIKey, bool, error)
	remoteWait time.Duration
	gate       *remoteGate

	mu sync.Mutex
	m  map[store.KeyHash]authEntry
	// gen counts forgets: a lookup that started before one does not
	// cache what it read, which may be the revoked key.
	gen uint64
	// used holds the keys' uses not yet flushed through the log, at
	// minute resolution (TakeKeyUses).
	used map[store.KeyHash]int64
	// revoked are keys this node saw revoked: a local miss on one is not
	// asked of the leader, whose FSM may not have applied the revoke yet
	// and would hand the key back for a whole TTL. Secrets are random, so
	// a revoked hash never comes back.
	revoked map[store.KeyHash]struct{}
}

type authEntry struct {
	owner   store.Owner
	scopes  store.Scopes
	expires time.Time
	usedAt  int64 // newest use recorded for this entry, Unix ms at minute resolution
}

// keyUseResolution is how coarse a key's last-used time is: one map write
// per key per minute, and at most one touch per key per flush.
const keyUseResolution = int64(time.Minute / time.Millisecond)

func newAuthCache(st *store.Store, now func() time.Time) *authCache {
	return &authCache{st: st, now: now, m: make(map[store.KeyHash]authEntry), used: make(map[store.KeyHash]int64),
		revoked: make(map[store.KeyHash]struct{})}
}

// askRemote looks a key up at the leader, within the gate's limits.
func (a *authCache) askRemote(h store.KeyHash, client clientKey) (authEntry, bool) {
	if a.remote == nil || a.gate == nil {
		return authEntry{}, false
	}
	v, found, err := a.gate.do(&a.gate.owners, a.gate.ownerMiss, string(h[:]), client, a.remoteWait, func(ctx context.Context) (any, bool, error) {
		o, k, found, err := a.remote(ctx, h)
		return authEntry{owner: o, scopes: k.Scopes}, found, err
	})
	if err != nil || !found {
		return authEntry{}, false
	}
	return v.(authEntry), true
}

// owner returns the owner of the API key h and the key's scopes; client
// is who asks. It records the use for the key's last-used time.
func (a *authCache) owner(h store.KeyHash, client clientKey) (store.Owner, store.Scopes, bool, error) {
	now := a.now()
	minute := now.UnixMilli() / keyUseResolution * keyUseResolution
	a.mu.Lock()
	e, ok := a.m[h]
	gen := a.gen
	if ok && now.Before(e.expires) {
		if e.usedAt < minute && len(a.used) < authCacheMax {
			e.usedAt = minute
			a.m[h] = e
			a.used[h] = minute
		}
		a.mu.Unlock()
		return e.owner, e.scopes, true, nil
	}
	a.mu.Unlock()
	o, k, found, err := a.st.APIKeyByHash(h)
	if err != nil {
		return store.Owner{}, 0, false, err
	}
	e = authEntry{owner: o, scopes: k.Scopes}
	if !found {
		a.mu.Lock()
		_, revoked := a.revoked[h]
		a.mu.Unlock()
		if revoked {
			return store.Owner{}, 0, false, nil
		}
		if e, found = a.askRemote(h, client); !found {
			return store.Owner{}, 0, false, nil
		}
	}
	e.expires, e.usedAt = now.Add(authCacheTTL), minute
	a.mu.Lock()
	if len(a.used) < authCacheMax { // past it, uses wait for the next flush
		a.used[h] = max(a.used[h], minute)
	}
	if a.gen == gen { // no revoke applied meanwhile: what we read is current
		if len(a.m) >= authCacheMax {
			clear(a.m)
		}
		a.m[h] = e
	}
	a.mu.Unlock()
	return e.owner, e.scopes, true, nil
}

// forget drops h from the cache: the FSM applied its revoke (it calls
// this before the revoke commits and again after).
func (a *authCache) forget(h store.KeyHash) {
	a.mu.Lock()
	delete(a.m, h)
	delete(a.used, h)
	a.gen++
	if len(a.revoked) >= authCacheMax {
		clear(a.revoked)
	}
	a.revoked[h] = struct{}{}
	a.mu.Unlock()
}

// takeUses returns the uses recorded since the last take and forgets them.
func (a *authCache) takeUses() []store.KeyTouch {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.used) == 0 {
		return nil
	}
	out := make([]store.KeyTouch, 0, len(a.used))
	for h, at := range a.used {
		out = append(out, store.KeyTouch{Hash: h, At: at})
	}
	clear(a.used)
	return out
}

// returnUses puts back uses a flush could not write, unless newer ones
// came meanwhile.
func (a *authCache) returnUses(ts []store.KeyTouch) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, t := range ts {
		if len(a.used) >= authCacheMax {
			return
		}
		a.used[t.Hash] = max(a.used[t.Hash], t.At)
	}
}

// reset forgets every cached key and miss: a snapshot restore may have
// removed or added any owner or key.
func (a *authCache) reset() {
	a.mu.Lock()
	clear(a.m)
	a.gen++
	a.mu.Unlock()
	if a.gate != nil {
		a.gate.ownerMiss.forgetAll()
		a.gate.linkMiss.forgetAll()
	}
}

var bearerPrefix = []byte("bearer ")

// bearerToken extracts the key from "Authorization: Bearer <key>".
func bearerToken(ctx *fasthttp.RequestCtx) []byte {
	v := bytes.TrimSpace(ctx.Request.Header.Peek("Authorization"))
	if len(v) <= len(bearerPrefix) || !bytes.EqualFold(v[:len(bearerPrefix)], bearerPrefix) {
		return nil
	}
	return bytes.TrimSpace(v[len(bearerPrefix):])
}

// authenticate resolves the caller and checks that the key holds a scope
// the request needs (scopeTable), or answers 401, 403 (or 500) itself.
func (s *Server) authenticate(ctx *fasthttp.RequestCtx) (store.Owner, store.KeyHash, bool) {
	key := bearerToken(ctx)
	if len(key) == 0 {
		s.m.authFailures.Inc()
		writeProblem(ctx, probUnauthorized, "missing API key: send the header 'Authorization: Bearer <key>'")
		return store.Owner{}, store.KeyHash{}, false
	}
	h := store.HashAPIKey(key)
	o, scopes, found, err := s.auth.owner(h, clientOf(ctx))
	if err != nil {
		s.log.Error("cannot look up API key", "err", err)
		writeProblem(ctx, probInternal, "the API key could not be checked")
		return store.Owner{}, store.KeyHash{}, false
	}
	if !found {
		s.m.authFailures.Inc()
		writeProblem(ctx, probUnauthorized, "the API key is not valid")
		return store.Owner{}, store.KeyHash{}, false
	}
	if s.suspended.Has(o.ID) {
		s.m.authFailures.Inc()
		writeProblem(ctx, probUnauthorized, "the account of this API key is suspended")
		return store.Owner{}, store.KeyHash{}, false
	}
	switch need, known := requiredScopes(string(ctx.Method()), string(ctx.Path())); {
	case !known && scopes != store.AllScopes: // a route without a row is closed to scoped keys
		s.m.scopeRefusals.Inc()
		writeProblem(ctx, probInsufficientScope, "this endpoint needs a key with every scope")
		return store.Owner{}, store.KeyHash{}, false
	case known && scopes&need == 0:
		s.m.scopeRefusals.Inc()
		writeProblem(ctx, probInsufficientScope, scopeDetail(need))
		return store.Owner{}, store.KeyHash{}, false
	}
	return o, h, true
}

// keyScopes returns the scopes of the key h as this node knows it (the
// cache, the store, the leader). POST /v1/keys uses it to refuse a grant
// beyond the caller's own.
func (s *Server) keyScopes(ctx *fasthttp.RequestCtx, h store.KeyHash) store.Scopes {
	_, scopes, found, err := s.auth.owner(h, clientOf(ctx))
	if err != nil || !found {
		return 0
	}
	return scopes
}

// ForgetKey drops the API key h from the authentication cache. The node
// calls it for every key the FSM revokes, before and after the commit.
func (s *Server) ForgetKey(h store.KeyHash) { s.auth.forget(h) }

// TakeKeyUses returns the keys used through this node since the last call,
// each with its newest use at minute resolution, for one touch_keys flush.
func (s *Server) TakeKeyUses() []store.KeyTouch { return s.auth.takeUses() }

// PendingKeyUses is how many keys have a use not yet flushed.
func (s *Server) PendingKeyUses() int {
	s.auth.mu.Lock()
	defer s.auth.mu.Unlock()
	return len(s.auth.used)
}

// ReturnKeyUses puts back uses whose flush failed, for the next one.
func (s *Server) ReturnKeyUses(ts []store.KeyTouch) { s.auth.returnUses(ts) }
