package edge

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/store"
)

// UpdateDomain makes the test writer a DomainWriter, applying the change
// through store.Batch as the FSM does.
func (w *testWriter) UpdateDomain(_ context.Context, ch *store.DomainChange) (store.Domain, uint64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out store.Domain
	index, err := w.apply(func(b *store.Batch, _ uint64) error {
		var err error
		out, err = b.UpdateDomain(ch)
		return err
	})
	return out, index, err
}

// operatorDomain applies an operator change (add, approve) directly.
func (w *testWriter) operatorDomain(t testing.TB, op store.DomainOp, name, owner string) {
	t.Helper()
	if _, _, err := w.UpdateDomain(context.Background(), &store.DomainChange{Op: op, Name: name, Owner: owner, At: 1_700_000_000_000}); err != nil {
		t.Fatal(err)
	}
}

// doHost sends one request with the given Host header.
func (e *env) doHost(method, host, path, key, body string) *response {
	e.t.Helper()
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	resp := &fasthttp.Response{}
	req.Header.SetMethod(method)
	req.SetRequestURI("http://" + host + path)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.SetContentType("application/json")
		req.SetBodyString(body)
	}
	if err := e.client.Do(req, resp); err != nil {
		e.t.Fatalf("%s %s%s: %v", method, host, path, err)
	}
	r := &response{status: resp.StatusCode(), header: &fasthttp.ResponseHeader{}, body: append([]byte(nil), resp.Body()...)}
	resp.Header.CopyTo(r.header)
	return r
}

func TestDomainRegisterListDelete(t *testing.T) {
	e := newEnv(t, nil)
	r := e.do("POST", "/v1/domains", keyAlice, `{"domain": "Go.Acme.COM."}`)
	e.expect(r, 201, "")
	var v domainView
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatal(err)
	}
	if v.Domain != "go.acme.com" || v.Status != "pending" || v.ApprovedAt != nil {
		t.Fatalf("registered: %+v", v)
	}
	// Registering it again is the same domain, without a write.
	e.expect(e.do("POST", "/v1/domains", keyAlice, `{"domain": "go.acme.com"}`), 200, "")
	// Someone else's.
	e.expect(e.do("POST", "/v1/domains", keyBob, `{"domain": "go.acme.com"}`), 409, "domain-taken")

	for _, bad := range []string{`"go.acme.com:8080"`, `"127.0.0.1"`, `"[::1]"`, `"localhost"`, `"https://go.acme.com"`, `"go.acme.com/x"`, `"-a.acme.com"`, `"a_b.acme.com"`, `""`, `"` + e.srv.ownHost + `"`} {
		e.expect(e.do("POST", "/v1/domains", keyAlice, `{"domain": `+bad+`}`), 400, "")
	}
	// This env's public host is an IP literal; a named one is refused by
	// name in TestDomainRefusesPublicHost.

	// IDNA goes to punycode.
	r = e.do("POST", "/v1/domains", keyAlice, `{"domain": "bücher.example"}`)
	e.expect(r, 201, "")
	if !strings.Contains(string(r.body), `"xn--bcher-kva.example"`) {
		t.Fatalf("IDNA domain: %s", r.body)
	}

	r = e.do("GET", "/v1/domains", keyAlice, "")
	e.expect(r, 200, "")
	var list struct{ Domains []domainView }
	if err := json.Unmarshal(r.body, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Domains) != 2 || list.Domains[0].Domain != "go.acme.com" || list.Domains[1].Domain != "xn--bcher-kva.example" {
		t.Fatalf("list: %s", r.body)
	}
	e.expect(e.do("GET", "/v1/domains", keyBob, ""), 200, "")

	e.expect(e.do("DELETE", "/v1/domains/go.acme.com", keyBob, ""), 404, "not-found")
	e.expect(e.do("DELETE", "/v1/domains/go.acme.com", keyAlice, ""), 204, "")
	e.expect(e.do("DELETE", "/v1/domains/go.acme.com", keyAlice, ""), 404, "not-found")
	// A deleted domain stays its last owner's.
	e.expect(e.do("POST", "/v1/domains", keyBob, `{"domain": "go.acme.com"}`), 409, "domain-taken")
	e.expect(e.do("POST", "/v1/domains", keyAlice, `{"domain": "go.acme.com"}`), 201, "")
}

func TestDomainRefusesPublicHost(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.PublicURL = "https://sho.rt" })
	e.expect(e.do("POST", "/v1/domains", keyAlice, `{"domain": "SHO.RT"}`), 400, "invalid-domain")
}

// TestDomainLinks: the same alias on two custom domains and the default
// domain are three links, each redirecting on its own Host; only the
// approved owner creates on a domain.
func TestDomainLinks(t *testing.T) {
	e := newEnv(t, nil)
	e.expect(e.do("POST", "/v1/links", keyAlice, `{"url": "https://a.example/", "domain": "go.acme.com"}`), 403, "domain-forbidden")
	e.expect(e.do("POST", "/v1/domains", keyAlice, `{"domain": "go.acme.com"}`), 201, "")
	e.expect(e.do("POST", "/v1/links", keyAlice, `{"url": "https://a.example/", "domain": "go.acme.com"}`), 403, "domain-not-approved")
	e.w.operatorDomain(t, store.DomainApprove, "go.acme.com", "")
	e.w.operatorDomain(t, store.DomainAdd, "bob.example", "bob")
	e.expect(e.do("POST", "/v1/links", keyBob, `{"url": "https://a.example/", "domain": "go.acme.com"}`), 403, "domain-forbidden")
	e.expect(e.do("POST", "/v1/links", keyAlice, `{"url": "https://a.example/", "domain": "bob.example"}`), 403, "domain-forbidden")
	e.expect(e.do("POST", "/v1/links", keyAlice, `{"url": "https://a.example/", "domain": "go.acme.com:80"}`), 400, "invalid-domain")

	acme := e.createLink(keyAlice, `{"url": "https://acme.example/launch", "alias": "launch", "domain": "GO.ACME.COM"}`)
	if acme.Code != "launch" || acme.Domain == nil || *acme.Domain != "go.acme.com" || acme.ShortURL != "http://go.acme.com/launch" {
		t.Fatalf("acme link: %+v", acme)
	}
	bob := e.createLink(keyBob, `{"url": "https://bob.example.org/launch", "alias": "launch", "domain": "bob.example"}`)
	plain := e.createLink(keyAlice, `{"url": "https://plain.example/launch", "alias": "launch"}`)
	if plain.Domain != nil || plain.ShortURL != "http://"+e.addr+"/launch" || bob.ShortURL != "http://bob.example/launch" {
		t.Fatalf("plain %+v bob %+v", plain, bob)
	}
	e.expect(e.do("POST", "/v1/links", keyAlice, `{"url": "https://x.example/", "alias": "launch", "domain": "go.acme.com"}`), 409, "alias-unavailable")
	gen := e.createLink(keyAlice, `{"url": "https://gen.example/", "domain": "go.acme.com"}`)
	if len(gen.Code) != store.CodeLen || gen.ShortURL != "http://go.acme.com/"+gen.Code {
		t.Fatalf("generated code on a domain: %+v", gen)
	}

	for _, tc := range []struct{ host, path, location string }{
		{"go.acme.com", "/launch", "https://acme.example/launch"},
		{"GO.acme.com:8080", "/launch", "https://acme.example/launch"},
		{"bob.example", "/launch", "https://bob.example.org/launch"},
		{e.addr, "/launch", "https://plain.example/launch"},
		{"go.acme.com", "/" + gen.Code, "https://gen.example/"},
	} {
		r := e.doHost("GET", tc.host, tc.path, "", "")
		if r.status != 302 || r.get("Location") != tc.location {
			t.Errorf("GET %s%s: %d %q; want 302 %q", tc.host, tc.path, r.status, r.get("Location"), tc.location)
		}
	}
	// The generated code exists on go.acme.com only.
	if r := e.doHost("GET", e.addr, "/"+gen.Code, "", ""); r.status != 404 {
		t.Errorf("generated code on the default domain: %d", r.status)
	}
	// An unknown host, a pending domain: the plain unknown-host page.
	e.expect(e.do("POST", "/v1/domains", keyBob, `{"domain": "pending.example"}`), 201, "")
	for _, host := range []string{"unknown.example", "pending.example"} {
		r := e.doHost("GET", host, "/launch", "", "")
		if r.status != 404 || !strings.Contains(string(r.body), "does not serve short links") {
			t.Errorf("GET %s/launch: %d %s", host, r.status, r.body)
		}
	}

	// The link routes take ?domain=.
	r := e.do("GET", "/v1/links/launch?domain=go.acme.com", keyAlice, "")
	e.expect(r, 200, "")
	if !strings.Contains(string(r.body), `"https://acme.example/launch"`) {
		t.Fatalf("GET ?domain=: %s", r.body)
	}
	e.expect(e.do("GET", "/v1/links/launch?domain=bob.example", keyAlice, ""), 404, "not-found")
	e.expect(e.do("GET", "/v1/links/launch?domain=bad:domain", keyAlice, ""), 404, "not-found")
	e.expect(e.do("PATCH", "/v1/links/launch?domain=go.acme.com", keyAlice, `{"click_limit": 5}`), 200, "")
	e.expect(e.do("DELETE", "/v1/links/launch?domain=go.acme.com", keyAlice, ""), 204, "")
	if r := e.doHost("GET", "go.acme.com", "/launch", "", ""); r.status != 410 {
		t.Errorf("deleted domain link: %d", r.status)
	}
	if r := e.doHost("GET", e.addr, "/launch", "", ""); r.status != 302 {
		t.Errorf("default-domain link after the domain one was deleted: %d", r.status)
	}
	// A short URL on an approved custom domain can be reported.
	e.expect(e.do("POST", "/v1/reports", "", `{"url": "https://GO.acme.com/launch?x=1", "reason": "spam"}`), 202, "")
	if rep, found, err := e.st.OpenReport("go.acme.com/launch"); err != nil || !found || rep.Code != "go.acme.com/launch" {
		t.Errorf("report of go.acme.com/launch: %+v %v %v", rep, found, err)
	}
	e.expect(e.do("POST", "/v1/reports", "", `{"url": "https://unknown.example/launch", "reason": "spam"}`), 400, "invalid-request")

	// A destination on an approved custom domain is a link to a link.
	e.expect(e.do("POST", "/v1/links", keyBob, `{"url": "https://go.acme.com/x"}`), 400, "invalid-url")

	// Deleting the domain stops its redirects at once.
	e.expect(e.do("DELETE", "/v1/domains/bob.example", keyBob, ""), 204, "")
	if r := e.doHost("GET", "bob.example", "/launch", "", ""); r.status != 404 {
		t.Errorf("deleted domain: %d", r.status)
	}

	// The list carries the domain.
	r = e.do("GET", "/v1/links", keyAlice, "")
	e.expect(r, 200, "")
	if !strings.Contains(string(r.body), `"domain":"go.acme.com"`) {
		t.Fatalf("list: %s", r.body)
	}
}

func TestNormalHost(t *testing.T) {
	for in, want := range map[string]string{
		"Go.Acme.Com":      "go.acme.com",
		"go.acme.com:8080": "go.acme.com",
		"go.acme.com.":     "go.acme.com",
		"[::1]:80":         "[",
		"127.0.0.1:1":      "127.0.0.1",
		"":                 "",
	} {
		if got := string(normalHost(nil, []byte(in))); got != want {
			t.Errorf("normalHost(%q) = %q; want %q", in, got, want)
		}
	}
	for in, want := range map[string]bool{"127.0.0.1": true, "1.2.3.4": true, "a.b1": false, "a.example": false, "1a.2": true} {
		if got := lastLabelNumeric([]byte(in)); got != want {
			t.Errorf("lastLabelNumeric(%q) = %v; want %v", in, got, want)
		}
	}
}

// domainBench is a bench server with a link on the public host and one
// on an approved custom domain under the same code.
func domainBench(b *testing.B) (*Server, fasthttp.RequestHandler) {
	srv, w := benchServer(b, Config{})
	w.operatorDomain(b, store.DomainAdd, "go.acme.com", "o")
	w.putLink(b, store.Link{Code: "go.acme.com/abc1234", URL: "https://example.com/some/long/path?utm_source=bench&x=%2F#frag", Owner: "o"})
	return srv, srv.Handler()
}

func benchHost(b *testing.B, h fasthttp.RequestHandler, host string) {
	ctx := requestCtx("GET", "/abc1234")
	ctx.Request.Header.SetHost(host)
	if !serveOnce(h, ctx, 302) {
		b.Fatalf("%s: status %d", host, ctx.Response.StatusCode())
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		serveOnce(h, ctx, 302)
	}
}

// BenchmarkRedirectHostPublic and BenchmarkRedirectHostCustom: the same
// cached redirect on the public host and on a custom domain.
func BenchmarkRedirectHostPublic(b *testing.B) {
	_, h := domainBench(b)
	benchHost(b, h, "127.0.0.1:8080")
}

func BenchmarkRedirectHostCustom(b *testing.B) {
	_, h := domainBench(b)
	benchHost(b, h, "Go.Acme.com")
}

func TestCustomDomainRedirectAllocatesNothing(t *testing.T) {
	srv, w := benchServer(t, Config{})
	w.operatorDomain(t, store.DomainAdd, "go.acme.com", "o")
	w.putLink(t, store.Link{Code: "go.acme.com/abc1234", URL: "https://example.com/x", Owner: "o"})
	h := srv.Handler()
	for _, host := range []string{"go.acme.com", "127.0.0.1", "unknown.example"} {
		ctx := requestCtx("GET", "/abc1234")
		ctx.Request.Header.SetHost(host)
		serveOnce(h, ctx, 0)
		if n := testing.AllocsPerRun(200, func() { serveOnce(h, ctx, 0) }); n != 0 {
			t.Errorf("Host %s: %v allocs per redirect; want 0", host, n)
		}
	}
}
