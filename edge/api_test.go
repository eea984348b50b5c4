package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/edge/problem"
	"github.com/waymark/waymark/store"
)

func TestCreateLink(t *testing.T) {
	e := newEnv(t, nil)
	r := e.do("POST", "/v1/links", keyAlice, `{"url":"HTTPS://Example.COM:443/Path?q=A%2Fb#Frag"}`)
	e.expect(r, 201, "")
	var got map[string]any
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"code", "short_url", "url", "redirect", "expires_at", "click_limit", "status", "created_at"} {
		if _, ok := got[k]; !ok {
			t.Errorf("response lacks %q: %s", k, r.body)
		}
	}
	code, _ := got["code"].(string)
	if len(code) != store.CodeLen {
		t.Fatalf("code: got %q; want %d characters", code, store.CodeLen)
	}
	want := map[string]any{
		"short_url": e.cfg.PublicURL + "/" + code, "url": "https://example.com/Path?q=A%2Fb#Frag",
		"redirect": 302.0, "expires_at": nil, "click_limit": nil, "status": "active",
		"created_at": "2026-11-30T12:00:00Z",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %v; want %v", k, got[k], v)
		}
	}
	if loc := r.get("Location"); loc != e.cfg.PublicURL+"/v1/links/"+code {
		t.Errorf("Location: got %q; want %q", loc, e.cfg.PublicURL+"/v1/links/"+code)
	}
	if r.get("Waymark-Index") == "" || r.get("Content-Type") != "application/json" {
		t.Errorf("headers: Waymark-Index %q Content-Type %q", r.get("Waymark-Index"), r.get("Content-Type"))
	}
	if rr := e.do("GET", "/"+code, "", ""); rr.status != 302 || rr.get("Location") != "https://example.com/Path?q=A%2Fb#Frag" {
		t.Fatalf("redirect: got %d Location %q", rr.status, rr.get("Location"))
	}

	// The same long URL twice gives two codes.
	again := e.createLink(keyAlice, `{"url":"https://example.com/Path?q=A%2Fb#Frag"}`)
	if again.Code == code {
		t.Fatalf("same URL twice: both got code %q", code)
	}

	full := e.createLink(keyAlice, `{"url":"https://example.com/f","alias":"Full_Link","expires_at":"2027-01-02T03:04:05.678+01:00","click_limit":10,"redirect":308}`)
	if full.Code != "Full_Link" || full.Redirect != 308 || *full.ExpiresAt != "2027-01-02T02:04:05.678Z" || *full.ClickLimit != 10 {
		t.Fatalf("full create: got %+v", full)
	}
	if rr := e.do("GET", "/Full_Link", "", ""); rr.status != 308 {
		t.Fatalf("redirect 308: got %d", rr.status)
	}
}

func TestCreateLinkAlias(t *testing.T) {
	e := newEnv(t, nil)
	e.createLink(keyAlice, `{"url":"https://example.com/","alias":"promo"}`)
	e.createLink(keyAlice, `{"url":"https://example.com/","alias":"PROMO"}`) // case-sensitive
	e.expect(e.do("POST", "/v1/links", keyBob, `{"url":"https://example.com/","alias":"promo"}`), 409, probAliasUnavailable)
	e.expect(e.do("POST", "/v1/links", keyAlice, `{"url":"https://example.com/","alias":"Admin"}`), 409, probAliasUnavailable)
	e.expect(e.do("POST", "/v1/links", keyAlice, `{"url":"https://example.com/","alias":"abcdefg"}`), 409, probAliasUnavailable)
	e.expect(e.do("POST", "/v1/links", keyAlice, `{"url":"https://example.com/","alias":"no"}`), 400, probInvalidRequest)
	e.expect(e.do("POST", "/v1/links", keyAlice, `{"url":"https://example.com/","alias":"a/b/c"}`), 400, probInvalidRequest)
	e.expect(e.do("POST", "/v1/links", keyAlice, `{"url":"https://example.com/","alias":""}`), 400, probInvalidRequest)
	// A deleted alias stays reserved (tombstone).
	e.expect(e.do("DELETE", "/v1/links/promo", keyAlice, ""), 204, "")
	e.expect(e.do("POST", "/v1/links", keyAlice, `{"url":"https://example.com/","alias":"promo"}`), 409, probAliasUnavailable)
	if r := e.do("GET", "/promo", "", ""); r.status != 410 {
		t.Fatalf("deleted alias: got %d; want 410", r.status)
	}
}

func TestCreateLinkErrors(t *testing.T) {
	e := newEnv(t, nil)
	tests := []struct {
		name, body string
		status     int
		problem    string
		detail     string
	}{
		{"scheme", `{"url":"ftp://example.com/"}`, 400, probInvalidURL, "scheme"},
		{"relative", `{"url":"/just/a/path"}`, 400, probInvalidURL, "absolute"},
		{"userinfo", `{"url":"https://user@example.com/"}`, 400, probInvalidURL, "user info"},
		{"too long", `{"url":"https://example.com/` + strings.Repeat("a", 2048) + `"}`, 400, probInvalidURL, "2048"},
		{"own host", `{"url":"` + e.cfg.PublicURL + `/abc1234"}`, 400, probInvalidURL, "service itself"},
		{"blocked host", `{"url":"https://evil.example/x"}`, 422, probDestinationBlocked, "evil.example"},
		{"blocked subdomain", `{"url":"https://WWW.Evil.Example/x"}`, 422, probDestinationBlocked, "www.evil.example"},
		{"blocked ipv6", `{"url":"https://[2001:DB8::BAD]/"}`, 422, probDestinationBlocked, ""},
		{"not json", `{"url":`, 400, probInvalidRequest, "not valid JSON"},
		{"garbage", `hello`, 400, probInvalidRequest, "not valid JSON"},
		{"array", `["https://example.com"]`, 400, probInvalidRequest, "JSON object"},
		{"trailing", `{"url":"https://example.com/"} {}`, 400, probInvalidRequest, "not valid JSON"},
		{"unknown field", `{"url":"https://example.com/","colour":"red"}`, 400, probInvalidRequest, `unknown field "colour"`},
		{"field case", `{"URL":"https://example.com/"}`, 400, probInvalidRequest, `unknown field "URL"`},
		{"missing url", `{}`, 400, probInvalidRequest, `"url" is required`},
		{"url type", `{"url":42}`, 400, probInvalidRequest, `"url" must be a string`},
		{"redirect type", `{"url":"https://example.com/","redirect":"301"}`, 400, probInvalidRequest, `"redirect" must be an integer`},
		{"redirect value", `{"url":"https://example.com/","redirect":303}`, 400, probInvalidRequest, "301, 302, 307 or 308"},
		{"click limit zero", `{"url":"https://example.com/","click_limit":0}`, 400, probInvalidRequest, "at least 1"},
		{"click limit float", `{"url":"https://example.com/","click_limit":1.5}`, 400, probInvalidRequest, "integer"},
		{"expiry format", `{"url":"https://example.com/","expires_at":"tomorrow"}`, 400, probInvalidRequest, "RFC 3339"},
		{"expiry past", `{"url":"https://example.com/","expires_at":"2020-01-01T00:00:00Z"}`, 400, probInvalidRequest, "in the past"},
		{"empty body", ``, 400, probInvalidRequest, "empty"},
		{"too large", `{"url":"https://example.com/","alias":"` + strings.Repeat("a", maxBodyBytes) + `"}`, 413, probTooLarge, "limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do("POST", "/v1/links", keyAlice, tt.body)
			e.expect(r, tt.status, tt.problem)
			p := r.problem(t)
			if !strings.Contains(p.Detail, tt.detail) || p.Title == "" || p.Instance != "/v1/links" {
				t.Errorf("problem: got %+v; want detail containing %q, a title and instance /v1/links", p, tt.detail)
			}
		})
	}
	// Beyond the server-wide limit fasthttp refuses the body before reading
	// it; the answer is still a 413 problem.
	status, h := e.rawRequest("POST /v1/links HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2097152\r\n\r\n")
	if status != "HTTP/1.1 413 Request Entity Too Large" || h["Content-Type"] != "application/problem+json" {
		t.Errorf("2 MiB body: got %q %v; want 413 problem", status, h)
	}
}

func TestUnauthorized(t *testing.T) {
	e := newEnv(t, nil)
	for _, header := range [][]string{
		nil,
		{"Authorization", "Bearer wrong-key"},
		{"Authorization", "Basic " + keyAlice},
		{"Authorization", "Bearer"},
	} {
		for _, req := range [][2]string{{"POST", "/v1/links"}, {"GET", "/v1/links"}, {"GET", "/v1/links/abcdefg"}, {"POST", "/v1/sites"}} {
			r := e.do(req[0], req[1], "", `{"url":"https://example.com/"}`, header...)
			e.expect(r, 401, probUnauthorized)
			if r.get("WWW-Authenticate") == "" {
				t.Errorf("%s %s: no WWW-Authenticate", req[0], req[1])
			}
		}
	}
	// The scheme is case-insensitive.
	e.expect(e.do("GET", "/v1/links", "", "", "Authorization", "bearer "+keyAlice), 200, "")
}

func TestProblemDocs(t *testing.T) {
	e := newEnv(t, nil)
	for _, name := range problem.Names() {
		pt, _ := problem.Lookup(name)
		r := e.do("GET", "/problems/"+name, "", "")
		if r.status != 200 || !strings.HasPrefix(r.get("Content-Type"), "text/plain") || !strings.Contains(string(r.body), pt.Title) {
			t.Errorf("/problems/%s: got %d %q %q", name, r.status, r.get("Content-Type"), r.body)
		}
	}
	if r := e.do("GET", "/problems/nope", "", ""); r.status != 404 {
		t.Errorf("/problems/nope: got %d; want 404", r.status)
	}
}

func TestIdempotency(t *testing.T) {
	e := newEnv(t, nil)
	body := `{"url":"https://example.com/idem","alias":"idem-1"}`
	first := e.do("POST", "/v1/links", keyAlice, body, "Idempotency-Key", "key-1")
	e.expect(first, 201, "")
	// Same key, same body (modulo whitespace, key order, host case): the
	// original answer.
	for _, b := range []string{body, `{ "alias": "idem-1", "url": "https://EXAMPLE.com/idem" }`} {
		r := e.do("POST", "/v1/links", keyAlice, b, "Idempotency-Key", "key-1")
		e.expect(r, 201, "")
		if string(r.body) != string(first.body) || r.get("Idempotent-Replayed") != "true" || r.get("Location") != first.get("Location") {
			t.Fatalf("replay: got %s (replayed %q, Location %q); want %s", r.body, r.get("Idempotent-Replayed"), r.get("Location"), first.body)
		}
	}
	// Same key, different body: 422.
	e.expect(e.do("POST", "/v1/links", keyAlice, `{"url":"https://example.com/other"}`, "Idempotency-Key", "key-1"), 422, probIdempotencyMismatch)
	// Keys are per owner.
	e.createLink(keyBob, `{"url":"https://example.com/idem"}`, "Idempotency-Key", "key-1")
	// Generated codes replay too, and create exactly one link.
	g1 := e.do("POST", "/v1/links", keyAlice, `{"url":"https://example.com/gen"}`, "Idempotency-Key", "key-2")
	g2 := e.do("POST", "/v1/links", keyAlice, `{"url":"https://example.com/gen"}`, "Idempotency-Key", "key-2")
	if string(g1.body) != string(g2.body) {
		t.Fatalf("generated replay: %s vs %s", g1.body, g2.body)
	}
	if n := len(e.listAll(keyAlice)); n != 2 {
		t.Fatalf("alice's links: got %d; want 2", n)
	}
	// After 24 h the key is forgotten.
	e.clock.Advance(24*time.Hour + time.Second)
	g3 := e.do("POST", "/v1/links", keyAlice, `{"url":"https://example.com/gen"}`, "Idempotency-Key", "key-2")
	e.expect(g3, 201, "")
	if string(g3.body) == string(g1.body) || g3.get("Idempotent-Replayed") != "" {
		t.Fatalf("after 24 h: got the old answer %s", g3.body)
	}
	e.expect(e.do("POST", "/v1/links", keyAlice, body, "Idempotency-Key", strings.Repeat("k", 256)), 400, probInvalidRequest)
}

// TestIdempotencyRaceLoser covers a concurrent duplicate that commits first:
// the Writer hands back the stored record.
func TestIdempotencyRaceLoser(t *testing.T) {
	e := newEnv(t, nil)
	rec := store.Idempotency{Status: 201, Response: []byte(`{"code":"winner"}`), CreatedAt: e.clock.Now().UnixMilli()}
	rec.RequestHash = requestHash("alice", "POST /v1/links", marshalJSON(createRequest{URL: "https://example.com/race", Redirect: 302}))
	w := &racingWriter{testWriter: e.w, rec: rec}
	srv, err := New(e.cfg, e.st, w)
	if err != nil {
		t.Fatal(err)
	}
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("POST")
	ctx.Request.SetRequestURI("/v1/links")
	ctx.Request.Header.Set("Authorization", "Bearer "+keyAlice)
	ctx.Request.Header.Set("Idempotency-Key", "k")
	ctx.Request.SetBodyString(`{"url":"https://example.com/race"}`)
	srv.Handler()(&ctx)
	if ctx.Response.StatusCode() != 201 || string(ctx.Response.Body()) != `{"code":"winner"}` || string(ctx.Response.Header.Peek("Idempotent-Replayed")) != "true" {
		t.Fatalf("got %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
}

type racingWriter struct {
	*testWriter
	rec store.Idempotency
}

func (w *racingWriter) CreateLink(_ context.Context, _ *store.Link, _ *store.IdempotencyWrite) (uint64, *store.Idempotency, error) {
	return 0, &w.rec, nil
}

func (e *env) listAll(key string) []linkView {
	e.t.Helper()
	var all []linkView
	cursor := ""
	for {
		r := e.do("GET", "/v1/links?limit=2&cursor="+cursor, key, "")
		e.expect(r, 200, "")
		var page struct {
			Links      []linkView `json:"links"`
			NextCursor *string    `json:"next_cursor"`
		}
		if err := json.Unmarshal(r.body, &page); err != nil {
			e.t.Fatal(err)
		}
		all = append(all, page.Links...)
		if page.NextCursor == nil {
			return all
		}
		cursor = *page.NextCursor
	}
}

func TestListLinksPagination(t *testing.T) {
	e := newEnv(t, nil)
	var codes []string
	for i := range 5 {
		codes = append(codes, e.createLink(keyAlice, fmt.Sprintf(`{"url":"https://example.com/%d"}`, i)).Code)
	}
	e.createLink(keyBob, `{"url":"https://example.com/bob"}`)
	all := e.listAll(keyAlice)
	if len(all) != 5 {
		t.Fatalf("links: got %d; want 5", len(all))
	}
	for i, v := range all {
		if want := codes[len(codes)-1-i]; v.Code != want {
			t.Errorf("link %d: got %s; want %s (newest first)", i, v.Code, want)
		}
	}
	r := e.do("GET", "/v1/links", keyAlice, "")
	e.expect(r, 200, "")
	if !strings.Contains(string(r.body), `"next_cursor":null`) {
		t.Errorf("single page: %s; want next_cursor null", r.body)
	}
	e.expect(e.do("GET", "/v1/links?limit=0", keyAlice, ""), 400, probInvalidRequest)
	e.expect(e.do("GET", "/v1/links?limit=abc", keyAlice, ""), 400, probInvalidRequest)
	e.expect(e.do("GET", "/v1/links?cursor=!!!", keyAlice, ""), 400, probInvalidRequest)
	if r := e.do("GET", "/v1/links", "", "", "Authorization", "Bearer someone-else"); r.status != 401 {
		t.Fatalf("unknown key: got %d", r.status)
	}
}

func TestTenantIsolation(t *testing.T) {
	e := newEnv(t, nil)
	v := e.createLink(keyAlice, `{"url":"https://example.com/mine"}`)
	for _, req := range []struct{ method, body string }{
		{"GET", ""}, {"PATCH", `{"url":"https://example.com/stolen"}`}, {"DELETE", ""},
	} {
		r := e.do(req.method, "/v1/links/"+v.Code, keyBob, req.body)
		e.expect(r, 404, probNotFound)
		missing := e.do(req.method, "/v1/links/zzzzzzz", keyBob, req.body)
		if r.problem(t).Detail != strings.ReplaceAll(missing.problem(t).Detail, "zzzzzzz", v.Code) {
			t.Errorf("%s: another owner's link and a missing link answer differently", req.method)
		}
	}
	if r := e.do("GET", "/"+v.Code, "", ""); r.get("Location") != "https://example.com/mine" {
		t.Fatalf("link changed by another owner: %q", r.get("Location"))
	}
	if got := e.listAll(keyBob); len(got) != 0 {
		t.Fatalf("bob sees %d links; want 0", len(got))
	}
	r := e.do("GET", "/v1/links/"+v.Code, keyAlice, "")
	e.expect(r, 200, "")
	if r.get("Waymark-Index") == "" {
		t.Errorf("GET: no Waymark-Index")
	}
}

func TestPatchLink(t *testing.T) {
	e := newEnv(t, nil)
	v := e.createLink(keyAlice, `{"url":"https://example.com/a","click_limit":5,"expires_at":"2027-01-01T00:00:00Z"}`)
	path := "/v1/links/" + v.Code

	r := e.do("PATCH", path, keyAlice, `{"url":"https://Example.com:443/b?x=%2F","expires_at":null,"click_limit":null}`)
	e.expect(r, 200, "")
	var got linkView
	json.Unmarshal(r.body, &got)
	if got.URL != "https://example.com/b?x=%2F" || got.ExpiresAt != nil || got.ClickLimit != nil || r.get("Waymark-Index") == "" {
		t.Fatalf("PATCH: got %s (index %q)", r.body, r.get("Waymark-Index"))
	}
	r = e.do("PATCH", path, keyAlice, `{"expires_at":"2028-01-01T00:00:00Z","click_limit":7}`)
	e.expect(r, 200, "")
	json.Unmarshal(r.body, &got)
	if *got.ExpiresAt != "2028-01-01T00:00:00Z" || *got.ClickLimit != 7 || got.URL != "https://example.com/b?x=%2F" {
		t.Fatalf("PATCH expiry: got %s", r.body)
	}
	e.expect(e.do("PATCH", path, keyAlice, `{}`), 200, "")
	e.expect(e.do("PATCH", path, keyAlice, `{"status":"disabled"}`), 200, "")
	if r := e.do("GET", "/"+v.Code, "", ""); r.status != 410 {
		t.Fatalf("disabled: got %d; want 410", r.status)
	}
	e.expect(e.do("PATCH", path, keyAlice, `{"status":"active"}`), 200, "")
	// The first PATCH changed the destination: its review window is open.
	if r := e.do("GET", "/"+v.Code, "", ""); r.status != 200 || !strings.Contains(string(r.body), "Continue") {
		t.Fatalf("re-enabled within the edit's review window: got %d; want 200 and the interstitial", r.status)
	}
	e.clock.Advance(24 * time.Hour)
	if r := e.do("GET", "/"+v.Code, "", ""); r.status != 302 {
		t.Fatalf("re-enabled after the review window: got %d; want 302", r.status)
	}

	for _, tt := range []struct{ body, problem, detail string }{
		{`{"status":"blocked"}`, probInvalidRequest, `"active" or "disabled"`},
		{`{"status":"gone"}`, probInvalidRequest, `"active" or "disabled"`},
		{`{"url":null}`, probInvalidRequest, "cannot be null"},
		{`{"redirect":301}`, probInvalidRequest, `unknown field "redirect"`},
		{`{"url":"mailto:x@example.com"}`, probInvalidURL, ""},
		{`{"url":"https://evil.example/"}`, probDestinationBlocked, ""},
		{`{"expires_at":"2001-01-01T00:00:00Z"}`, probInvalidRequest, "in the past"},
		{`{"click_limit":-1}`, probInvalidRequest, "at least 1"},
	} {
		r := e.do("PATCH", path, keyAlice, tt.body)
		want := 400
		if tt.problem == probDestinationBlocked {
			want = 422
		}
		e.expect(r, want, tt.problem)
		if !strings.Contains(r.problem(t).Detail, tt.detail) {
			t.Errorf("PATCH %s: detail %q; want it to contain %q", tt.body, r.problem(t).Detail, tt.detail)
		}
	}

	// Permanent redirects keep their destination.
	p := e.createLink(keyAlice, `{"url":"https://example.com/p","redirect":301}`)
	e.expect(e.do("PATCH", "/v1/links/"+p.Code, keyAlice, `{"url":"https://example.com/q"}`), 409, probPermanentRedirect)
	e.expect(e.do("PATCH", "/v1/links/"+p.Code, keyAlice, `{"url":"https://EXAMPLE.com/p","click_limit":3}`), 200, "")

	// Operator states lock the status.
	for _, st := range []store.Status{store.StatusBlocked, store.StatusLegalBlock, store.StatusReview} {
		e.w.operatorPatch(t, store.LinkPatch{Code: v.Code, SetStatus: true, Status: st})
		e.expect(e.do("PATCH", path, keyAlice, `{"status":"active"}`), 409, probLinkLocked)
		e.expect(e.do("DELETE", path, keyAlice, ""), 409, probLinkLocked)
		r := e.do("GET", path, keyAlice, "")
		e.expect(r, 200, "")
		if !strings.Contains(string(r.body), `"status":"`+st.String()+`"`) {
			t.Errorf("GET while %s: %s", st, r.body)
		}
	}
	e.expect(e.do("PATCH", "/v1/links/a.b", keyAlice, `{}`), 404, probNotFound)
}

func TestExpiredStatusInAPI(t *testing.T) {
	e := newEnv(t, nil)
	v := e.createLink(keyAlice, `{"url":"https://example.com/x","expires_at":"2026-11-30T12:00:05Z"}`)
	e.clock.Advance(5 * time.Second)
	r := e.do("GET", "/v1/links/"+v.Code, keyAlice, "")
	if !strings.Contains(string(r.body), `"status":"expired"`) {
		t.Fatalf("expired link: %s", r.body)
	}
	if r := e.do("GET", "/"+v.Code, "", ""); r.status != 410 {
		t.Fatalf("redirect after expiry: got %d; want 410", r.status)
	}
}

func TestDeleteLink(t *testing.T) {
	e := newEnv(t, nil)
	v := e.createLink(keyAlice, `{"url":"https://example.com/d"}`)
	r := e.do("DELETE", "/v1/links/"+v.Code, keyAlice, "")
	e.expect(r, 204, "")
	if r.get("Waymark-Index") == "" {
		t.Errorf("DELETE: no Waymark-Index")
	}
	e.expect(e.do("DELETE", "/v1/links/"+v.Code, keyAlice, ""), 204, "") // idempotent
	if r := e.do("GET", "/"+v.Code, "", ""); r.status != 410 {
		t.Fatalf("after DELETE: got %d; want 410", r.status)
	}
	r = e.do("GET", "/v1/links/"+v.Code, keyAlice, "")
	e.expect(r, 200, "")
	if !strings.Contains(string(r.body), `"status":"disabled"`) {
		t.Fatalf("GET after DELETE: %s", r.body)
	}
}

func TestWriteUnavailable(t *testing.T) {
	e := newEnv(t, nil)
	v := e.createLink(keyAlice, `{"url":"https://example.com/u"}`)
	for _, err := range []error{store.ErrNoLeader, fmt.Errorf("cannot apply: %w", store.ErrUnknownOutcome)} {
		e.w.failNext(err)
		r := e.do("POST", "/v1/links", keyAlice, `{"url":"https://example.com/u","alias":"unavail-1"}`)
		e.expect(r, 503, probUnavailable)
		if r.get("Retry-After") == "" {
			t.Errorf("%v: no Retry-After", err)
		}
		e.w.failNext(err)
		e.expect(e.do("PATCH", "/v1/links/"+v.Code, keyAlice, `{"status":"disabled"}`), 503, probUnavailable)
		e.w.failNext(err)
		e.expect(e.do("POST", "/v1/sites", keyAlice, `{"domain":"u.example"}`), 503, probUnavailable)
	}
	e.w.failNext(errInjected)
	e.expect(e.do("DELETE", "/v1/links/"+v.Code, keyAlice, ""), 500, probInternal)
}

func TestGeneratedCodeCollisionIsA500(t *testing.T) {
	e := newEnv(t, nil)
	v := e.createLink(keyAlice, `{"url":"https://example.com/c"}`)
	e.w.mu.Lock()
	e.w.nextCode = v.Code
	e.w.mu.Unlock()
	e.expect(e.do("POST", "/v1/links", keyAlice, `{"url":"https://example.com/c2"}`), 500, probInternal)
}

func TestRateLimit(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.WriteRate = 1 }) // burst 2
	for i := range 2 {
		e.createLink(keyAlice, fmt.Sprintf(`{"url":"https://example.com/%d"}`, i))
	}
	r := e.do("POST", "/v1/links", keyAlice, `{"url":"https://example.com/3"}`)
	e.expect(r, 429, probRateLimited)
	if r.get("Retry-After") != "1" {
		t.Errorf("Retry-After: got %q; want 1", r.get("Retry-After"))
	}
	// Reads and other keys are not limited.
	e.expect(e.do("GET", "/v1/links", keyAlice, ""), 200, "")
	e.createLink(keyBob, `{"url":"https://example.com/bob"}`)
	e.clock.Advance(time.Second)
	e.createLink(keyAlice, `{"url":"https://example.com/4"}`)
	if got := counterValue(e.set, "waymark_api_rate_limited_total"); got != 1 {
		t.Errorf("rate-limited counter: got %d; want 1", got)
	}
}

func TestCreateSite(t *testing.T) {
	e := newEnv(t, nil)
	r := e.do("POST", "/v1/sites", keyAlice, `{"domain":"Blog.Example.COM","timezone":"Europe/Berlin"}`)
	e.expect(r, 201, "")
	var got siteView
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.ID) != 12 || got.Domain != "blog.example.com" || got.Timezone != "Europe/Berlin" || got.CreatedAt != "2026-11-30T12:00:00Z" {
		t.Fatalf("site: got %+v", got)
	}
	if r.get("Waymark-Index") == "" || r.get("Location") != e.cfg.PublicURL+"/v1/sites/"+got.ID {
		t.Errorf("headers: Waymark-Index %q Location %q", r.get("Waymark-Index"), r.get("Location"))
	}
	st, found, err := e.st.Site(got.ID)
	if err != nil || !found || st.Owner != "alice" {
		t.Fatalf("stored site: %+v %v %v", st, found, err)
	}
	e.expect(e.do("POST", "/v1/sites", keyBob, `{"domain":"blog.example.com"}`), 409, probDomainTaken)
	r = e.do("POST", "/v1/sites", keyAlice, `{"domain":"utc.example"}`)
	e.expect(r, 201, "")
	if !strings.Contains(string(r.body), `"timezone":"UTC"`) {
		t.Errorf("default timezone: %s", r.body)
	}
	for _, body := range []string{
		`{"domain":"https://x.example/"}`, `{"domain":"x.example:8080"}`, `{"domain":"bad..example"}`,
		`{"domain":""}`, `{}`, `{"domain":"x.example","timezone":"Mars/Olympus"}`,
		`{"domain":"x.example","timezone":"Local"}`, `{"domain":"x.example","extra":1}`,
	} {
		e.expect(e.do("POST", "/v1/sites", keyAlice, body), 400, probInvalidRequest)
	}
}

func TestOperationalEndpoints(t *testing.T) {
	ready := false
	e := newEnv(t, func(c *Config) {
		c.Ready = func() (bool, string) { return ready, "raft has no leader" }
		c.Routes = map[string]fasthttp.RequestHandler{
			"/s.js":      func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("script") },
			"/dashboard": func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("dash") },
		}
		c.APIFallback = func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(299) }
	})
	if r := e.do("GET", "/healthz", "", ""); r.status != 200 || string(r.body) != "ok\n" {
		t.Errorf("/healthz: got %d %q", r.status, r.body)
	}
	if r := e.do("GET", "/readyz", "", ""); r.status != 503 || !strings.Contains(string(r.body), "raft has no leader") {
		t.Errorf("/readyz not ready: got %d %q", r.status, r.body)
	}
	ready = true
	if r := e.do("GET", "/readyz", "", ""); r.status != 200 {
		t.Errorf("/readyz ready: got %d", r.status)
	}
	e.w.putLink(t, store.Link{Code: "metric", URL: "https://example.com/", Owner: "alice"})
	e.do("GET", "/metric", "", "")
	e.do("GET", "/v1/links", keyAlice, "")
	r := e.do("GET", "/metrics", "", "")
	for _, want := range []string{`waymark_redirects_total{result="miss"} 1`, `waymark_api_requests_total{route="links.list",status="200"} 1`, "waymark_edge_cache_entries"} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("/metrics lacks %q:\n%s", want, r.body)
		}
	}
	if r := e.do("GET", "/s.js", "", ""); string(r.body) != "script" {
		t.Errorf("/s.js: %q", r.body)
	}
	if r := e.do("GET", "/dashboard", "", ""); string(r.body) != "dash" {
		t.Errorf("/dashboard: %q", r.body)
	}
	if r := e.do("GET", "/v1/links/abc/stats", keyAlice, ""); r.status != 299 {
		t.Errorf("fallback: got %d; want 299", r.status)
	}
	e.expect(e.do("PUT", "/v1/links", keyAlice, "{}"), 405, probMethodNotAllowed)
	if r := e.do("PUT", "/v1/links/abcdefg", keyAlice, "{}"); r.get("Allow") != "GET, PATCH, DELETE" {
		t.Errorf("Allow: got %q", r.get("Allow"))
	}
}

func TestAPINotFoundWithoutFallback(t *testing.T) {
	e := newEnv(t, nil)
	e.expect(e.do("GET", "/v1/nothing", keyAlice, ""), 404, probNotFound)
	e.expect(e.do("GET", "/v1/links/abc/stats", keyAlice, ""), 404, probNotFound)
}

func TestNewRejectsBadConfig(t *testing.T) {
	st := openStore(t)
	w := newTestWriter(t, st)
	for _, cfg := range []Config{
		{PublicURL: ""},
		{PublicURL: "ftp://x"},
		{PublicURL: "http://x", Routes: map[string]fasthttp.RequestHandler{"/healthz": func(*fasthttp.RequestCtx) {}}},
		{PublicURL: "http://x", Routes: map[string]fasthttp.RequestHandler{"nope": func(*fasthttp.RequestCtx) {}}},
	} {
		if _, err := New(cfg, st, w); err == nil {
			t.Errorf("New(%+v): got nil error", cfg)
		}
	}
}

func FuzzCreateBody(f *testing.F) {
	for _, s := range []string{
		`{"url":"https://example.com/"}`,
		`{"url":"https://example.com/","alias":"abc","expires_at":"2030-01-01T00:00:00Z","click_limit":3,"redirect":301}`,
		`{"url":null}`, `{"url":1}`, `[]`, `{`, ``, `{"url":"x","redirect":1e400}`, `{"click_limit":9223372036854775808}`,
		`{"url":"x","expires_at":"0000-01-01T00:00:00Z"}`, `{"url":"x","url":"y"}`,
		`{"url":"x","tags":["Spring","sms"]}`, `{"url":"x","tags":["a,b"]}`, `{"url":"x","tags":null}`,
		// Redirect rules (issue 13): the rules body is fuzzed through here.
		`{"url":"x","rules":[{"if":{"device":["ios"]},"url":"https://a.example/"},{"if":{"country":["de","AT"]},"url":"https://b.example/"}]}`,
		`{"url":"x","rules":[{"if":{"language":["FR"],"query":{"ref":"qr","n":["1","2"]}},"url":"https://c.example/"}]}`,
		`{"url":"x","rules":[{"if":{"os":["ios"],"browser":["chrome"],"after":"2030-01-01T00:00:00Z","before":"2031-01-01T00:00:00Z"},"url":"https://d.example/"}]}`,
		`{"url":"x","rules":[{"if":{"device":["fridge"]},"url":"https://a.example/"}]}`, `{"url":"x","rules":[{"if":{},"url":"u"}]}`,
		`{"url":"x","rules":null}`, `{"url":"x","rules":{}}`, `{"url":"x","rules":[1]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, rawRules, err := decodeCreate(body)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("empty error for %q", body)
			}
			return
		}
		if !store.ValidRedirect(req.Redirect) || req.ClickLimit < 0 || req.ExpiresAt < 0 || store.CheckStoredTags(req.Tags) != nil {
			t.Fatalf("decodeCreate(%q) accepted %+v", body, req)
		}
		rules, rerr := decodeRules(rawRules)
		if rerr != nil {
			if !strings.HasPrefix(rerr.detail, "rules") || !strings.HasPrefix(rerr.pointer, "/rules") {
				t.Fatalf("rule error without its place: %+v", rerr)
			}
			return
		}
		// Destinations are checked by the server; what the decoder let
		// through either encodes and decodes back as it was, or is
		// refused by the store's own check.
		enc, err := store.EncodeRules(rules)
		if err != nil {
			if !errors.Is(err, store.ErrInvalidRules) {
				t.Fatalf("EncodeRules: %v", err)
			}
			return
		}
		back, err := store.DecodeRules(enc)
		if err != nil || len(back) != len(rules) {
			t.Fatalf("rules %+v: encoded, then decoded to %+v, %v", rules, back, err)
		}
		if again, _ := store.EncodeRules(back); again != enc {
			t.Fatalf("rules %+v: a second encoding differs", rules)
		}
	})
}
