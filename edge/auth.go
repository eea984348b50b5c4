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

// authCache maps API-key hashes to owners. Only hits are cached here, so
// a stream of bad keys cannot fill it; the leader's misses are remembered
// by the remote gate, which also bounds how often the leader is asked.
type authCache struct {
	st  *store.Store
	now func() time.Time
	// remote asks the leader about a key this replica has not applied yet
	// (an owner created a moment ago in another region); nil on one node.
	remote     func(ctx context.Context, h store.KeyHash) (store.Owner, bool, error)
	remoteWait time.Duration
	gate       *remoteGate

	mu sync.Mutex
	m  map[store.KeyHash]authEntry
}

type authEntry struct {
	owner   store.Owner
	expires time.Time
}

func newAuthCache(st *store.Store, now func() time.Time) *authCache {
	return &authCache{st: st, now: now, m: make(map[store.KeyHash]authEntry)}
}

// askRemote looks a key up at the leader, within the gate's limits.
func (a *authCache) askRemote(h store.KeyHash, client clientKey) (store.Owner, bool) {
	if a.remote == nil || a.gate == nil {
		return store.Owner{}, false
	}
	v, found, err := a.gate.do(&a.gate.owners, a.gate.ownerMiss, string(h[:]), client, a.remoteWait, func(ctx context.Context) (any, bool, error) {
		o, found, err := a.remote(ctx, h)
		return o, found, err
	})
	if err != nil || !found {
		return store.Owner{}, false
	}
	return v.(store.Owner), true
}

// owner returns the owner of the API key h; client is who asks.
func (a *authCache) owner(h store.KeyHash, client clientKey) (store.Owner, bool, error) {
	now := a.now()
	a.mu.Lock()
	e, ok := a.m[h]
	a.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.owner, true, nil
	}
	o, found, err := a.st.OwnerByKey(h)
	if err != nil {
		return store.Owner{}, false, err
	}
	if !found {
		if o, found = a.askRemote(h, client); !found {
			return store.Owner{}, false, nil
		}
	}
	a.mu.Lock()
	if len(a.m) >= authCacheMax {
		clear(a.m)
	}
	a.m[h] = authEntry{owner: o, expires: now.Add(authCacheTTL)}
	a.mu.Unlock()
	return o, true, nil
}

// reset forgets every cached key and miss: a snapshot restore may have
// removed or added any owner.
func (a *authCache) reset() {
	a.mu.Lock()
	clear(a.m)
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

// authenticate resolves the caller or answers 401 (or 500) itself.
func (s *Server) authenticate(ctx *fasthttp.RequestCtx) (store.Owner, store.KeyHash, bool) {
	key := bearerToken(ctx)
	if len(key) == 0 {
		s.m.authFailures.Inc()
		writeProblem(ctx, probUnauthorized, "missing API key: send the header 'Authorization: Bearer <key>'")
		return store.Owner{}, store.KeyHash{}, false
	}
	h := store.HashAPIKey(key)
	o, found, err := s.auth.owner(h, clientOf(ctx))
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
	return o, h, true
}
