package edge

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/store"
)

// CreateKey and RevokeKey make the test writer a KeyWriter. A revoke drops
// the key from the server's cache before and after its commit, as the FSM
// hook does on a node.
func (w *testWriter) CreateKey(_ context.Context, k *store.APIKey) (store.APIKey, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := *k
	if _, err := w.apply(func(b *store.Batch, _ uint64) error { return b.CreateAPIKey(&c) }); err != nil {
		return store.APIKey{}, err
	}
	got, _, err := w.st.APIKeyByID(store.KeyID(k.Hash))
	return got, err
}

func (w *testWriter) RevokeKey(_ context.Context, owner, id string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var h store.KeyHash
	_, err := w.apply(func(b *store.Batch, _ uint64) error {
		k, err := b.RevokeAPIKey(owner, id)
		h = k.Hash
		if err == nil && w.srv != nil {
			w.srv.ForgetKey(h)
		}
		return err
	})
	if err == nil && w.srv != nil {
		w.srv.ForgetKey(h)
	}
	return err
}

// TestScopeTable: each route of the public API needs the scope worked out
// from the list (reads need :read, changes :write; sites read with
// either of their two scopes; keys always keys:write), and paths no route
// serves have no row.
func TestScopeTable(t *testing.T) {
	const (
		lr = store.ScopeLinksRead
		lw = store.ScopeLinksWrite
		sr = store.ScopeStatsRead
		sw = store.ScopeSitesWrite
		dw = store.ScopeDomainsWrite
		kw = store.ScopeKeysWrite
	)
	cases := []struct {
		method, path string
		want         store.Scopes // 0: no row
	}{
		{"GET", "/v1/links", lr},
		{"HEAD", "/v1/links", lr},
		{"POST", "/v1/links", lw},
		{"POST", "/v1/links/bulk", lw},
		{"GET", "/v1/links/abc1234", lr},
		{"PATCH", "/v1/links/abc1234", lw},
		{"DELETE", "/v1/links/abc1234", lw},
		{"GET", "/v1/links/abc1234/history", lr},
		{"GET", "/v1/links/abc1234/qr", lr},
		{"POST", "/v1/links/abc1234/qr", 0},
		{"GET", "/v1/links/export", lr},
		{"GET", "/v1/links/abc1234/stats", sr},
		{"GET", "/v1/links/abc1234/stats/breakdown", sr},
		{"GET", "/v1/links/abc1234/stats/overview", sr},
		{"GET", "/v1/sites/s1/stats/aggregate", sr},
		{"GET", "/v1/sites/s1/stats/timeseries", sr},
		{"POST", "/api/v2/query", sr},
		{"GET", "/api/v2/query", sr},
		{"GET", "/v1/sites", sr | sw},
		{"POST", "/v1/sites", sw},
		{"GET", "/v1/sites/s1", sr | sw},
		{"PATCH", "/v1/sites/s1", sw},
		{"GET", "/v1/sites/s1/goals", sr | sw},
		{"POST", "/v1/sites/s1/goals", sw},
		{"GET", "/v1/sites/s1/goals/g1", sr | sw},
		{"DELETE", "/v1/sites/s1/goals/g1", sw},
		{"GET", "/v1/domains", lr | dw},
		{"POST", "/v1/domains", dw},
		{"GET", "/v1/domains/go.acme.com", lr | dw},
		{"DELETE", "/v1/domains/go.acme.com", dw},
		{"GET", "/v1/keys", kw},
		{"POST", "/v1/keys", kw},
		{"DELETE", "/v1/keys/0123456789abcdef", kw},
		// No row: not a route, or a method no route answers.
		{"GET", "/v1/links/", 0},
		{"GET", "/v1/links//history", 0},
		{"GET", "/v1/links/a/b/c", 0},
		{"GET", "/v1/linksx", 0},
		{"PUT", "/v1/links", 0},
		{"POST", "/v1/reports", 0},
		{"GET", "/v1/keys/0123456789abcdef", 0},
		{"GET", "/v1/sites/s1/stats", 0},
		{"GET", "/v1/sites/s1/stats/", 0},
		{"GET", "/", 0},
		{"GET", "", 0},
	}
	for _, tc := range cases {
		got, ok := requiredScopes(tc.method, tc.path)
		if ok != (tc.want != 0) || got != tc.want {
			t.Errorf("%s %s: got %v (row %v); want %v", tc.method, tc.path, got, ok, tc.want)
		}
	}
}

// keyResp is POST /v1/keys's answer.
type keyResp struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	Scopes     []string `json:"scopes"`
	CreatedAt  string   `json:"created_at"`
	LastUsedAt *string  `json:"last_used_at"`
	Key        string   `json:"key"`
}

func (e *env) makeKey(key, body string) keyResp {
	e.t.Helper()
	r := e.do("POST", "/v1/keys", key, body)
	e.expect(r, 201, "")
	var k keyResp
	if err := json.Unmarshal(r.body, &k); err != nil {
		e.t.Fatal(err)
	}
	return k
}

func TestKeysAPI(t *testing.T) {
	e := newEnv(t, nil)
	// The old key (K only) has every scope, so it can make any key.
	ro := e.makeKey(keyAlice, `{"name":" read only ","scopes":["links:read"]}`)
	if !strings.HasPrefix(ro.Key, store.APIKeyPrefix) || len(ro.Key) != len(store.APIKeyPrefix)+48 ||
		ro.ID != store.KeyID(store.HashAPIKey([]byte(ro.Key))) || ro.Name != "read only" ||
		len(ro.Scopes) != 1 || ro.Scopes[0] != "links:read" || ro.LastUsedAt != nil || ro.CreatedAt != "2026-11-30T12:00:00Z" {
		t.Fatalf("created key = %+v", ro)
	}
	e.createLink(keyAlice, `{"url":"https://example.com/a"}`)

	// links:read reads links, but cannot create one, nor make keys.
	e.expect(e.do("GET", "/v1/links", ro.Key, ""), 200, "")
	r := e.do("POST", "/v1/links", ro.Key, `{"url":"https://example.com/b"}`)
	e.expect(r, 403, "insufficient-scope")
	if d := r.problem(t).Detail; !strings.Contains(d, "links:write") {
		t.Errorf("detail %q does not name links:write", d)
	}
	e.expect(e.do("POST", "/v1/keys", ro.Key, `{"name":"x","scopes":["links:read"]}`), 403, "insufficient-scope")
	e.expect(e.do("GET", "/v1/keys", ro.Key, ""), 403, "insufficient-scope")

	// A keys:write key cannot grant what it lacks; it can grant its own.
	kw := e.makeKey(keyAlice, `{"name":"key maker","scopes":["keys:write","links:read"]}`)
	r = e.do("POST", "/v1/keys", kw.Key, `{"name":"more","scopes":["links:read","links:write,stats:read"]}`)
	e.expect(r, 403, "insufficient-scope")
	if d := r.problem(t).Detail; !strings.Contains(d, "links:write, stats:read") {
		t.Errorf("grant refusal %q does not name links:write, stats:read", d)
	}
	sub := e.makeKey(kw.Key, `{"name":"sub","scopes":["links:read"]}`)

	// Bad bodies.
	for _, body := range []string{`{"scopes":["links:read"]}`, `{"name":"x"}`, `{"name":"x","scopes":[]}`,
		`{"name":"x","scopes":["links:admin"]}`, `{"name":"","scopes":["links:read"]}`, `{"name":"x","scopes":["links:read"],"extra":1}`, `[]`} {
		e.expect(e.do("POST", "/v1/keys", keyAlice, body), 400, "invalid-request")
	}

	// The list: every key of alice, oldest first, the old one as "default"
	// with every scope, no secrets; bob sees none of them.
	r = e.do("GET", "/v1/keys", keyAlice, "")
	e.expect(r, 200, "")
	if strings.Contains(string(r.body), ro.Key) || strings.Contains(string(r.body), `"key"`) {
		t.Fatalf("the list shows a secret: %s", r.body)
	}
	var list struct {
		Keys []keyResp `json:"keys"`
	}
	json.Unmarshal(r.body, &list)
	if len(list.Keys) != 4 || list.Keys[0].Name != "default" || len(list.Keys[0].Scopes) != 6 {
		t.Fatalf("alice's keys = %s", r.body)
	}
	r = e.do("GET", "/v1/keys", keyBob, "")
	json.Unmarshal(r.body, &list)
	if len(list.Keys) != 1 || list.Keys[0].Name != "default" {
		t.Fatalf("bob's keys = %s", r.body)
	}

	// Revoke: bob cannot revoke alice's key (404, as a missing one); the
	// key maker can revoke a key; the revoked key answers 401 at once,
	// though it was cached a moment ago.
	e.expect(e.do("DELETE", "/v1/keys/"+ro.ID, keyBob, ""), 404, "not-found")
	e.expect(e.do("GET", "/v1/links", sub.Key, ""), 200, "")
	e.expect(e.do("DELETE", "/v1/keys/"+sub.ID, kw.Key, ""), 204, "")
	e.expect(e.do("GET", "/v1/links", sub.Key, ""), 401, "unauthorized")
	e.expect(e.do("DELETE", "/v1/keys/"+sub.ID, kw.Key, ""), 404, "not-found")
	e.expect(e.do("DELETE", "/v1/keys/nothex", keyAlice, ""), 404, "not-found")
	e.expect(e.do("GET", "/v1/keys/"+ro.ID, keyAlice, ""), 405, "method-not-allowed")
}

// Stats are answered outside edge (APIFallback, the /api/v2/query route),
// but their scope is checked here: a links:read key gets 403 and never
// reaches the handler; a stats:read key does, and cannot read links.
func TestStatsScopes(t *testing.T) {
	reached := 0
	stats := func(ctx *fasthttp.RequestCtx) { reached++; ctx.SetStatusCode(200) }
	e := newEnv(t, func(c *Config) {
		c.APIFallback = stats
		c.Routes = map[string]fasthttp.RequestHandler{"/api/v2/query": stats}
	})
	lr := e.makeKey(keyAlice, `{"name":"links","scopes":["links:read"]}`)
	sr := e.makeKey(keyAlice, `{"name":"stats","scopes":["stats:read"]}`)
	for _, path := range []string{"/v1/links/abc1234/stats", "/v1/sites/s1/stats/aggregate"} {
		e.expect(e.do("GET", path, lr.Key, ""), 403, "insufficient-scope")
		e.expect(e.do("GET", path, "", ""), 401, "unauthorized")
		e.expect(e.do("GET", path, sr.Key, ""), 200, "")
	}
	// A stats-like path the table has no row for needs every scope.
	e.expect(e.do("GET", "/v1/links/abc1234/stats/", sr.Key, ""), 403, "insufficient-scope")
	e.expect(e.do("GET", "/v1/links/abc1234/stats/", keyAlice, ""), 200, "")
	e.expect(e.do("POST", "/api/v2/query", lr.Key, `{}`), 403, "insufficient-scope")
	e.expect(e.do("POST", "/api/v2/query", sr.Key, `{}`), 200, "")
	if reached != 4 {
		t.Fatalf("the stats handler ran %d times; want 4 (for the stats:read key, and the full key on the odd path)", reached)
	}
	e.expect(e.do("GET", "/v1/links", sr.Key, ""), 403, "insufficient-scope")
	e.expect(e.do("GET", "/v1/sites", sr.Key, ""), 200, "")
	e.expect(e.do("POST", "/v1/sites", sr.Key, `{"domain":"example.org"}`), 403, "insufficient-scope")
}

// Uses are kept per key at minute resolution, one per minute, until taken;
// a revoked key's pending use is dropped.
func TestKeyUses(t *testing.T) {
	e := newEnv(t, nil)
	k := e.makeKey(keyAlice, `{"name":"ci","scopes":["links:read"]}`)
	e.srv.TakeKeyUses()               // alice's own use while making it
	e.clock.Advance(90 * time.Second) // 12:01:30
	e.expect(e.do("GET", "/v1/links", k.Key, ""), 200, "")
	e.clock.Advance(20 * time.Second) // 12:01:50, same minute
	e.expect(e.do("GET", "/v1/links", k.Key, ""), 200, "")
	uses := e.srv.TakeKeyUses()
	// 2026-11-30T12:01:00Z in ms, by hand: the fake clock starts at 12:00.
	want := time.Date(2026, 11, 30, 12, 1, 0, 0, time.UTC).UnixMilli()
	if len(uses) != 1 || uses[0].Hash != store.HashAPIKey([]byte(k.Key)) || uses[0].At != want {
		t.Fatalf("uses = %+v; want one at %d", uses, want)
	}
	if again := e.srv.TakeKeyUses(); len(again) != 0 {
		t.Fatalf("taken twice: %+v", again)
	}
	e.srv.ReturnKeyUses(uses) // a failed flush
	if back := e.srv.TakeKeyUses(); len(back) != 1 || back[0].At != want {
		t.Fatalf("returned uses = %+v", back)
	}
	e.clock.Advance(time.Minute)
	e.expect(e.do("GET", "/v1/links", k.Key, ""), 200, "")
	e.expect(e.do("DELETE", "/v1/keys/"+k.ID, keyAlice, ""), 204, "")
	for _, u := range e.srv.TakeKeyUses() {
		if u.Hash == store.HashAPIKey([]byte(k.Key)) {
			t.Fatalf("a revoked key's use is still pending: %+v", u)
		}
	}
}

// A lookup that read the store before a revoke was applied must not put
// the key back into the cache after the revoke dropped it.
func TestAuthCacheForgetFencesARacingLookup(t *testing.T) {
	st := openStore(t)
	w := newTestWriter(t, st)
	w.addOwner(t, "alice", keyAlice)
	clock := newFakeClock()
	a := newAuthCache(st, clock.Now)
	h := store.HashAPIKey([]byte(keyAlice))
	// A remote lookup stands in for the slow read: the forget lands while
	// it is in flight.
	revokedMeanwhile := false
	a.remote = func(context.Context, store.KeyHash) (store.Owner, store.APIKey, bool, error) {
		a.forget(h)
		revokedMeanwhile = true
		return store.Owner{ID: "alice"}, store.APIKey{Scopes: store.AllScopes}, true, nil
	}
	a.gate = newRemoteGate(clock.Now, metrics.NewSet())
	a.remoteWait = time.Second
	other := store.HashAPIKey([]byte("not in the store"))
	if _, _, found, err := a.owner(other, noClient); err != nil || !found || !revokedMeanwhile {
		t.Fatalf("lookup: found %v, err %v, raced %v", found, err, revokedMeanwhile)
	}
	a.mu.Lock()
	_, cached := a.m[other]
	a.mu.Unlock()
	if cached {
		t.Fatal("a lookup that raced a forget was cached")
	}
	// Without a race, a hit is cached.
	if _, _, found, _ := a.owner(h, noClient); !found {
		t.Fatal("alice's key not found")
	}
	a.mu.Lock()
	_, cached = a.m[h]
	a.mu.Unlock()
	if !cached {
		t.Fatal("a plain hit was not cached")
	}
}

// A key this node saw revoked is not asked of the leader after a local
// miss: the leader may not have applied the revoke yet.
func TestRevokedKeyIsNotAskedRemotely(t *testing.T) {
	st := openStore(t)
	clock := newFakeClock()
	a := newAuthCache(st, clock.Now)
	asked := 0
	a.remote = func(context.Context, store.KeyHash) (store.Owner, store.APIKey, bool, error) {
		asked++
		return store.Owner{ID: "alice"}, store.APIKey{Scopes: store.AllScopes}, true, nil
	}
	a.gate = newRemoteGate(clock.Now, metrics.NewSet())
	a.remoteWait = time.Second
	fresh, revoked := store.HashAPIKey([]byte("fresh")), store.HashAPIKey([]byte("revoked"))
	if _, _, found, _ := a.owner(fresh, noClient); !found || asked != 1 {
		t.Fatalf("a fresh key: found %v after %d remote asks; want found after 1", found, asked)
	}
	a.forget(revoked)
	if _, _, found, _ := a.owner(revoked, noClient); found || asked != 1 {
		t.Fatalf("a revoked key: found %v after %d remote asks; want not found, no new ask", found, asked)
	}
}

// FuzzDecodeKeyRequest: any body either decodes to a checked name and
// known scopes or is refused; it never panics.
func FuzzDecodeKeyRequest(f *testing.F) {
	f.Add([]byte(`{"name":"ci","scopes":["links:read","stats:read"]}`))
	f.Add([]byte(`{"name":" x ","scopes":["links:read,keys:write"]}`))
	f.Add([]byte(`{"name":"x","scopes":[]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		name, scopes, err := decodeKeyRequest(b)
		if err != nil {
			return
		}
		if store.CheckKeyName(name) != nil || scopes == 0 || scopes&^store.AllScopes != 0 {
			t.Fatalf("accepted %q: name %q scopes %v", b, name, scopes)
		}
	})
}
