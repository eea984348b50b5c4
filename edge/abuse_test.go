package edge

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/store"
)

// A suspended owner's links answer 410 at once, from the cache too, and
// its key 401; other owners are untouched; unsuspending restores both.
func TestSuspendedOwner(t *testing.T) {
	set := NewOwnerSet()
	e := newEnv(t, func(c *Config) { c.SuspendedOwners = set })
	a := e.createLink(keyAlice, `{"url":"https://example.com/alice"}`)
	b := e.createLink(keyBob, `{"url":"https://example.com/bob"}`)
	rev := e.createLink(keyAlice, `{"url":"https://example.com/review"}`)
	e.w.operatorPatch(t, store.LinkPatch{Code: rev.Code, SetStatus: true, Status: store.StatusReview})
	legal := e.createLink(keyAlice, `{"url":"https://example.com/legal"}`)
	e.w.operatorPatch(t, store.LinkPatch{Code: legal.Code, SetStatus: true, Status: store.StatusLegalBlock})
	for code, want := range map[string]int{a.Code: 302, b.Code: 302, rev.Code: 200, legal.Code: 451} {
		e.expect(e.do("GET", "/"+code, "", ""), want, "") // and now cached
	}

	set.Set("alice", true)
	r := e.do("GET", "/"+a.Code, "", "")
	e.expect(r, 410, "")
	if r.get("Location") != "" || !strings.Contains(string(r.body), "<html") {
		t.Errorf("suspended link: Location %q, body %q; want the 410 page without a destination", r.get("Location"), r.body)
	}
	e.expect(e.do("HEAD", "/"+a.Code, "", ""), 410, "")
	e.expect(e.do("GET", "/"+rev.Code, "", ""), 410, "")   // no interstitial either
	e.expect(e.do("GET", "/"+legal.Code, "", ""), 451, "") // a legal block keeps its own answer
	e.expect(e.do("GET", "/"+b.Code, "", ""), 302, "")
	r = e.do("GET", "/v1/links", keyAlice, "")
	e.expect(r, 401, probUnauthorized)
	if p := r.problem(t); !strings.Contains(p.Detail, "suspended") {
		t.Errorf("401 detail %q; want it to say suspended", p.Detail)
	}
	e.expect(e.do("POST", "/v1/links", keyAlice, `{"url":"https://example.com/new"}`), 401, probUnauthorized)
	e.expect(e.do("GET", "/v1/links", keyBob, ""), 200, "")
	if _, found, err := e.srv.LookupOwner(store.HashAPIKey([]byte(keyAlice))); found || err != nil {
		t.Errorf("LookupOwner(alice) while suspended = found %v, %v; want not found", found, err)
	}

	set.Set("alice", false)
	e.expect(e.do("GET", "/"+a.Code, "", ""), 302, "")
	e.expect(e.do("GET", "/"+rev.Code, "", ""), 200, "")
	e.expect(e.do("GET", "/v1/links", keyAlice, ""), 200, "")
}

func TestOwnerSet(t *testing.T) {
	s := NewOwnerSet()
	if s.Has("a") || s.Len() != 0 {
		t.Fatal("new set is not empty")
	}
	s.Set("a", true)
	s.Set("b", true)
	s.Set("a", true)
	s.Set("c", false)
	if !s.Has("a") || !s.Has("b") || s.Has("c") || s.Len() != 2 {
		t.Fatalf("after adds: a %v b %v c %v len %d; want a, b", s.Has("a"), s.Has("b"), s.Has("c"), s.Len())
	}
	s.Set("a", false)
	if s.Has("a") || s.Len() != 1 {
		t.Fatalf("after removing a: has a %v, len %d", s.Has("a"), s.Len())
	}
	s.Replace([]string{"x", "y"})
	if s.Has("b") || !s.Has("x") || !s.Has("y") || s.Len() != 2 {
		t.Fatalf("after Replace: len %d", s.Len())
	}
	s.Replace(nil)
	if s.m.Load() != nil {
		t.Fatal("an empty set keeps a map: the redirect path would do a lookup")
	}
}

// retryAfter checks a 429 rate-limited answer and its Retry-After.
func retryAfter(e *env, r *response, want string) {
	e.t.Helper()
	e.expect(r, 429, probRateLimited)
	if got := r.get("Retry-After"); got != want {
		e.t.Errorf("Retry-After: got %q; want %q (detail %q)", got, want, r.problem(e.t).Detail)
	}
}

// noCreateLimits turns every create limit off; a test turns one back on.
func noCreateLimits(c *Config) {
	c.CreateRateIP, c.CreateRateKey, c.CreateRateDomain = -1, -1, -1
}

func TestCreateRateLimitPerKey(t *testing.T) {
	e := newEnv(t, func(c *Config) { noCreateLimits(c); c.CreateRateKey = 0.25 }) // burst 2.5
	// A failure of the service (no leader) gives its token back, or the
	// second create below would be refused.
	e.w.failNext(store.ErrNoLeader)
	e.expect(e.do("POST", "/v1/links", keyAlice, `{"url":"https://k3.example/"}`), 503, probUnavailable)
	for i := range 2 {
		e.createLink(keyAlice, fmt.Sprintf(`{"url":"https://k%d.example/"}`, i))
	}
	// 0.5 token left; one more needs 0.5 / 0.25 per s = 2 s.
	retryAfter(e, e.do("POST", "/v1/links", keyAlice, `{"url":"https://k3.example/"}`), "2")
	e.createLink(keyBob, `{"url":"https://k3.example/"}`)                                                     // another key has its own bucket
	e.expect(e.do("PATCH", "/v1/links/nope123", keyAlice, `{"url":"https://x.example/"}`), 404, probNotFound) // edits are not creates
	e.clock.Advance(1900 * time.Millisecond)                                                                  // 0.025 short: 0.1 s, rounded up to 1
	retryAfter(e, e.do("POST", "/v1/links", keyAlice, `{"url":"https://k3.example/"}`), "1")
	e.clock.Advance(100 * time.Millisecond)
	e.createLink(keyAlice, `{"url":"https://k3.example/"}`)
	// A client's own mistake keeps its token: 4 s refill one, a refused
	// alias spends it, and the next create waits 1 / 0.25 = 4 s.
	e.clock.Advance(4 * time.Second)
	e.expect(e.do("POST", "/v1/links", keyAlice, `{"url":"https://k4.example/","alias":"x"}`), 400, probInvalidRequest)
	retryAfter(e, e.do("POST", "/v1/links", keyAlice, `{"url":"https://k5.example/"}`), "4")
	if got := counterValue(e.set, `waymark_api_create_rate_limited_total{limit="key"}`); got != 3 {
		t.Errorf("key refusals: got %d; want 3", got)
	}
}

func TestCreateRateLimitPerAddress(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		noCreateLimits(c)
		c.CreateRateIP = 0.5 // burst 5
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	from := func(addr string) []string { return []string{"X-Forwarded-For", "198.51.100.1, " + addr} }
	e.w.failNext(store.ErrNoLeader) // the service's failure: the token comes back
	e.expect(e.do("POST", "/v1/links", keyAlice, `{"url":"https://ip.example/"}`, from("203.0.113.7")...), 503, probUnavailable)
	for i := range 5 {
		e.createLink(keyAlice, fmt.Sprintf(`{"url":"https://ip%d.example/"}`, i), from("203.0.113.7")...)
	}
	// Empty; one token at 0.5/s is 2 s away. Another key does not help.
	retryAfter(e, e.do("POST", "/v1/links", keyBob, `{"url":"https://ip.example/"}`, from("203.0.113.7")...), "2")
	e.createLink(keyAlice, `{"url":"https://ip.example/"}`, from("203.0.113.8")...)
	// Requests without a key spend the address's budget too.
	for range 5 {
		e.expect(e.do("POST", "/v1/links", "", `{"url":"https://ip.example/"}`, from("203.0.113.9")...), 401, probUnauthorized)
	}
	retryAfter(e, e.do("POST", "/v1/links", keyAlice, `{"url":"https://ip.example/"}`, from("203.0.113.9")...), "2")
	// IPv6 clients share a bucket per /64.
	for i := range 5 {
		e.createLink(keyAlice, fmt.Sprintf(`{"url":"https://v6-%d.example/"}`, i), from("2001:db8:1:2::1")...)
	}
	retryAfter(e, e.do("POST", "/v1/links", keyAlice, `{"url":"https://v6.example/"}`, from("2001:db8:1:2:ffff::9")...), "2")
	e.createLink(keyAlice, `{"url":"https://v6.example/"}`, from("2001:db8:1:3::1")...)
	if got := counterValue(e.set, `waymark_api_create_rate_limited_total{limit="ip"}`); got != 3 {
		t.Errorf("address refusals: got %d; want 3", got)
	}
}

// Without a trusted proxy, X-Forwarded-For is the client's own claim:
// the client is the loopback peer, which no address limit applies to.
// Believed, the same header would be limited at the second create.
func TestCreateRateLimitIgnoresUntrustedForwardedFor(t *testing.T) {
	e := newEnv(t, func(c *Config) { noCreateLimits(c); c.CreateRateIP = 0.1 }) // burst 1
	for range 3 {
		e.createLink(keyAlice, `{"url":"https://a.example/"}`, "X-Forwarded-For", "203.0.113.1")
	}
}

func TestCreateLimitClient(t *testing.T) {
	c := &createLimits{trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}}
	key := func(a string) clientKey { return clientKey(netip.MustParseAddr(a).As16()) }
	for _, tc := range []struct {
		peer, xff string
		want      clientKey
		limited   bool
	}{
		{"198.51.100.7", "", key("198.51.100.7"), true},
		{"198.51.100.7", "203.0.113.1", key("198.51.100.7"), true},               // an untrusted peer's header is ignored
		{"10.1.2.3", "203.0.113.1", key("203.0.113.1"), true},                    // one trusted proxy
		{"10.1.2.3", "6.6.6.6, 203.0.113.1, 10.9.9.9", key("203.0.113.1"), true}, // right-most untrusted; the rest is the client's claim
		{"10.1.2.3", "garbage, 203.0.113.1", key("203.0.113.1"), true},
		{"10.1.2.3", "203.0.113.1, garbage", key("10.1.2.3"), true}, // a bad entry ends the walk at the proxy
		{"10.1.2.3", "", key("10.1.2.3"), true},
		{"2001:db8:1:2:aaaa::1", "", key("2001:db8:1:2::"), true}, // IPv6 by /64
		{"::ffff:198.51.100.7", "", key("198.51.100.7"), true},
		{"127.0.0.1", "", clientKey{}, false},
		{"::1", "127.0.0.1", clientKey{}, false}, // a trusted local proxy relaying a local client
		{"::1", "198.51.100.9", key("198.51.100.9"), true},
	} {
		var ctx fasthttp.RequestCtx
		var req fasthttp.Request
		if tc.xff != "" {
			req.Header.Set("X-Forwarded-For", tc.xff)
		}
		ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(tc.peer), Port: 1}, nil)
		got, limited := c.clientOf(&ctx)
		if got != tc.want || limited != tc.limited {
			t.Errorf("peer %s, X-Forwarded-For %q: got %v limited %v; want %v limited %v", tc.peer, tc.xff, netip.AddrFrom16(got), limited, netip.AddrFrom16(tc.want), tc.limited)
		}
	}
}

func TestCreateRateLimitPerDomain(t *testing.T) {
	e := newEnv(t, func(c *Config) { noCreateLimits(c); c.CreateRateDomain = 0.1 }) // burst 1
	// Requests that are refused for their own fault spend nothing of the
	// domain's budget: no key, a bad key, a bad body, a bad alias, an
	// expiry in the past, a taken alias.
	taken := e.createLink(keyBob, `{"url":"https://elsewhere.example/","alias":"taken-alias"}`)
	bad := []struct {
		key, body string
		status    int
	}{
		{"", `{"url":"https://www.victim.co.uk/"}`, 401},
		{"wrong-key", `{"url":"https://www.victim.co.uk/"}`, 401},
		{keyAlice, `{"url":"https://www.victim.co.uk/",}`, 400},
		{keyAlice, `{"url":"https://www.victim.co.uk/","alias":"a"}`, 400},
		{keyAlice, `{"url":"https://www.victim.co.uk/","expires_at":"2001-01-01T00:00:00Z"}`, 400},
		{keyAlice, `{"url":"https://www.victim.co.uk/","alias":"` + taken.Code + `"}`, 409},
	}
	for _, b := range bad {
		e.expect(e.do("POST", "/v1/links", b.key, b.body), b.status, "")
	}
	// A create that fails in the write gives its token back.
	e.w.failNext(store.ErrNoLeader)
	e.expect(e.do("POST", "/v1/links", keyAlice, `{"url":"https://www.victim.co.uk/"}`), 503, probUnavailable)
	// So the one token is still there. An idempotent replay of the
	// create is not a new link and takes nothing either.
	e.createLink(keyAlice, `{"url":"https://www.victim.co.uk/"}`, "Idempotency-Key", "k1")
	e.expect(e.do("POST", "/v1/links", keyAlice, `{"url":"https://www.victim.co.uk/"}`, "Idempotency-Key", "k1"), 201, "")
	// Now the domain is spent: another subdomain and another owner share
	// the registrable domain victim.co.uk; one token at 0.1/s is 10 s away.
	retryAfter(e, e.do("POST", "/v1/links", keyBob, `{"url":"http://shop.victim.co.uk/x"}`), "10")
	e.createLink(keyBob, `{"url":"https://other.co.uk/"}`)
	e.clock.Advance(10 * time.Second)
	e.createLink(keyBob, `{"url":"http://shop.victim.co.uk/x"}`)
	if got := counterValue(e.set, `waymark_api_create_rate_limited_total{limit="domain"}`); got != 1 {
		t.Errorf("domain refusals: got %d; want 1", got)
	}
}

func TestRegistrableDomain(t *testing.T) {
	for host, want := range map[string]string{
		"example.com":          "example.com",
		"www.example.com.":     "example.com",
		"a.b.example.co.uk":    "example.co.uk",
		"alice.github.io":      "alice.github.io", // a private suffix: each user is a domain
		"github.io":            "github.io",
		"co.uk":                "co.uk",
		"localhost":            "localhost",
		"xn--bcher-kva.ch":     "xn--bcher-kva.ch",
		"x.xn--bcher-kva.ch":   "xn--bcher-kva.ch",
		"10.0.0.1":             "10.0.0.1",
		"[::ffff:10.0.0.1]":    "10.0.0.1",
		"[2001:db8::1]":        "2001:db8::/64",
		"[2001:db8:0:0:ff::1]": "2001:db8::/64",
	} {
		if got := registrableDomain(host); got != want {
			t.Errorf("registrableDomain(%q) = %q; want %q", host, got, want)
		}
	}
}

// Readers never see a torn set while writers change it (run with -race).
func TestOwnerSetConcurrent(t *testing.T) {
	s := NewOwnerSet()
	s.Set("always", true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 2000 {
			s.Set(fmt.Sprint("o", i%7), i%2 == 0)
		}
	}()
	for {
		select {
		case <-done:
			return
		default:
		}
		if !s.Has("always") {
			t.Fatal("a reader lost an owner no writer touched")
		}
	}
}
