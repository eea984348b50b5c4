package edge

import (
	"bytes"
	"html"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/store"
)

func TestRedirectLocationByteForByte(t *testing.T) {
	e := newEnv(t, nil)
	dests := []string{
		"https://example.com/a%2Fb/c+d?q=a+b&x=%E2%9C%93#frag%20ment",
		"https://example.com/%7euser/A%2fb?redirect=https%3A%2F%2Fother.example%2F",
		"https://example.com/caf\u00e9/\u2713?q=\u00fc#\u00e9",
		"http://[2001:db8::1]:8080/x?y#z",
		"https://example.com",
		"https://example.com/path;params?a=1&a=2&b=&c#",
	}
	for i, dest := range dests {
		code := "dest" + string(rune('a'+i))
		e.w.putLink(t, store.Link{Code: code, URL: dest, Owner: "alice", Status: store.StatusActive})
		for _, fromCache := range []bool{false, true} {
			status, h := e.rawGet("/" + code)
			if status != "HTTP/1.1 302 Found" {
				t.Fatalf("%s (cached %v): status line %q; want HTTP/1.1 302 Found", code, fromCache, status)
			}
			if h["Location"] != dest {
				t.Errorf("%s (cached %v): Location %q; want %q", code, fromCache, h["Location"], dest)
			}
			if h["Cache-Control"] != "private, max-age=60" {
				t.Errorf("Cache-Control: got %q; want private, max-age=60", h["Cache-Control"])
			}
			if _, ok := h["Server"]; ok {
				t.Errorf("Server header sent: %q", h["Server"])
			}
		}
	}
}

func TestRedirectTypesAndCacheControl(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.PrivateMaxAge = 30 * time.Second })
	tests := []struct {
		redirect uint16
		cc       string
	}{
		{301, "public, max-age=3600"},
		{302, "private, max-age=30"},
		{307, "private, max-age=30"},
		{308, "public, max-age=3600"},
	}
	for _, tt := range tests {
		code := "type" + string(rune('0'+tt.redirect%10))
		e.w.putLink(t, store.Link{Code: code, URL: "https://example.com/" + code, Owner: "alice", Redirect: tt.redirect})
		r := e.do("GET", "/"+code, "", "")
		if r.status != int(tt.redirect) || r.get("Location") != "https://example.com/"+code || r.get("Cache-Control") != tt.cc {
			t.Errorf("%d: got %d Location %q Cache-Control %q; want %d, %q", tt.redirect, r.status, r.get("Location"), r.get("Cache-Control"), tt.redirect, tt.cc)
		}
		if len(r.body) != 0 {
			t.Errorf("%d: body %q; want empty", tt.redirect, r.body)
		}
	}
}

func TestRedirectHEAD(t *testing.T) {
	e := newEnv(t, nil)
	e.w.putLink(t, store.Link{Code: "headme", URL: "https://example.com/h", Owner: "alice"})
	r := e.do("HEAD", "/headme", "", "")
	if r.status != 302 || r.get("Location") != "https://example.com/h" {
		t.Fatalf("HEAD: got %d Location %q; want 302 https://example.com/h", r.status, r.get("Location"))
	}
	r = e.do("HEAD", "/missing", "", "")
	if r.status != 404 || len(r.body) != 0 {
		t.Fatalf("HEAD missing: got %d body %q; want 404 and no body", r.status, r.body)
	}
}

func TestRedirectNotFoundIsNegativelyCached(t *testing.T) {
	e := newEnv(t, nil)
	for i := range 3 {
		r := e.do("GET", "/nosuch1", "", "")
		if r.status != 404 || r.get("Location") != "" {
			t.Fatalf("GET %d: got %d Location %q; want 404 without Location", i, r.status, r.get("Location"))
		}
		if !strings.HasPrefix(r.get("Content-Type"), "text/html") || !bytes.Contains(r.body, []byte("Link not found")) {
			t.Fatalf("404 page: Content-Type %q body %q", r.get("Content-Type"), r.body)
		}
		if r.get("Cache-Control") != "no-store" {
			t.Errorf("404 Cache-Control: got %q; want no-store", r.get("Cache-Control"))
		}
	}
	if hits := counterValue(e.set, "waymark_edge_cache_hits_total"); hits != 2 {
		t.Errorf("cache hits: got %d; want 2 (the 2nd and 3rd lookups)", hits)
	}
	// Creating the code invalidates the negative entry.
	e.w.putLink(t, store.Link{Code: "nosuch1", URL: "https://example.com/now", Owner: "alice"})
	if r := e.do("GET", "/nosuch1", "", ""); r.status != 302 {
		t.Fatalf("after create: got %d; want 302", r.status)
	}
}

func TestRedirectImpossibleCodesAreNotLookedUp(t *testing.T) {
	e := newEnv(t, nil)
	for _, path := range []string{"/", "/a", "/ab", "/a.b.c", "/abc/def", "/" + strings.Repeat("x", 33), "/%00abc", "/abc%2F"} {
		r := e.do("GET", path, "", "")
		if r.status != 404 || r.get("Location") != "" {
			t.Errorf("GET %s: got %d Location %q; want 404 without Location", path, r.status, r.get("Location"))
		}
	}
	if n := e.srv.cache.len(); n != 0 {
		t.Errorf("cache entries: got %d; want 0", n)
	}
	if r := e.do("POST", "/abcdef", "", "x"); r.status != 405 || r.get("Allow") != "GET, HEAD" {
		t.Errorf("POST /abcdef: got %d Allow %q; want 405 GET, HEAD", r.status, r.get("Allow"))
	}
}

func TestRedirectStatusPages(t *testing.T) {
	e := newEnv(t, nil)
	dest := "https://phish.example/login?next=%2Fbank&a=1"
	tests := []struct {
		status store.Status
		code   int
		check  func(t *testing.T, body string)
	}{
		{store.StatusDisabled, 410, func(t *testing.T, body string) { wantContains(t, body, "no longer available") }},
		{store.StatusLimited, 410, func(t *testing.T, body string) { wantContains(t, body, "click limit") }},
		{store.StatusLegalBlock, 451, func(t *testing.T, body string) { wantContains(t, body, "legal") }},
		{store.StatusBlocked, 410, func(t *testing.T, body string) {
			wantContains(t, body, "phish.example")
			if strings.Contains(body, "href") || strings.Contains(body, "login") || strings.Contains(body, "https://phish") {
				t.Errorf("warning page links to or spells out the destination:\n%s", body)
			}
		}},
		{store.StatusReview, 200, func(t *testing.T, body string) {
			wantContains(t, body, "phish.example")
			wantContains(t, body, `href="`+html.EscapeString(dest)+`"`)
			wantContains(t, body, `class="button"`)
			wantContains(t, body, "Continue")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.status.String(), func(t *testing.T) {
			code := "st-" + tt.status.String()
			e.w.putLink(t, store.Link{Code: code, URL: dest, Owner: "alice", Status: tt.status})
			for range 2 { // miss, then hit
				r := e.do("GET", "/"+code, "", "")
				if r.status != tt.code || r.get("Location") != "" {
					t.Fatalf("got %d Location %q; want %d without Location", r.status, r.get("Location"), tt.code)
				}
				if ct := r.get("Content-Type"); ct != "text/html; charset=utf-8" {
					t.Errorf("Content-Type: got %q", ct)
				}
				if !strings.Contains(r.get("Content-Security-Policy"), "default-src 'none'") {
					t.Errorf("Content-Security-Policy: got %q", r.get("Content-Security-Policy"))
				}
				tt.check(t, string(r.body))
			}
		})
	}
}

func wantContains(t *testing.T, body, sub string) {
	t.Helper()
	if !strings.Contains(body, sub) {
		t.Errorf("page does not contain %q:\n%s", sub, body)
	}
}

func TestRedirectExpiryFromCache(t *testing.T) {
	e := newEnv(t, nil)
	expires := e.clock.Now().Add(10 * time.Second).UnixMilli()
	e.w.putLink(t, store.Link{Code: "expiring", URL: "https://example.com/e", Owner: "alice", ExpiresAt: expires})
	r := e.do("GET", "/expiring", "", "")
	if r.status != 302 || r.get("Cache-Control") != "private, max-age=10" {
		t.Fatalf("before expiry: got %d Cache-Control %q; want 302 private, max-age=10", r.status, r.get("Cache-Control"))
	}
	e.clock.Advance(9 * time.Second)
	if r := e.do("GET", "/expiring", "", ""); r.status != 302 || r.get("Cache-Control") != "private, max-age=1" {
		t.Fatalf("1 s before expiry: got %d Cache-Control %q; want 302 private, max-age=1", r.status, r.get("Cache-Control"))
	}
	hits := counterValue(e.set, "waymark_edge_cache_hits_total")
	e.clock.Advance(time.Second)
	if r := e.do("GET", "/expiring", "", ""); r.status != 410 || r.get("Location") != "" {
		t.Fatalf("at expiry: got %d Location %q; want 410 without Location", r.status, r.get("Location"))
	}
	if got := counterValue(e.set, "waymark_edge_cache_hits_total"); got != hits+1 {
		t.Errorf("cache hits: got %d; want %d (the 410 came from the cached entry)", got, hits+1)
	}
}

func TestRedirectSeesChangesOnNextRequest(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.EditReview = -1 }) // no bait-and-switch window
	v := e.createLink(keyAlice, `{"url":"https://example.com/one"}`)
	if r := e.do("GET", "/"+v.Code, "", ""); r.get("Location") != "https://example.com/one" {
		t.Fatalf("first: Location %q", r.get("Location"))
	}
	e.expect(e.do("PATCH", "/v1/links/"+v.Code, keyAlice, `{"url":"https://example.com/two"}`), 200, "")
	if r := e.do("GET", "/"+v.Code, "", ""); r.status != 302 || r.get("Location") != "https://example.com/two" {
		t.Fatalf("after PATCH: got %d Location %q; want 302 https://example.com/two", r.status, r.get("Location"))
	}
	e.w.operatorPatch(t, store.LinkPatch{Code: v.Code, SetStatus: true, Status: store.StatusLegalBlock})
	if r := e.do("GET", "/"+v.Code, "", ""); r.status != 451 {
		t.Fatalf("after takedown: got %d; want 451", r.status)
	}
	e.w.operatorPatch(t, store.LinkPatch{Code: v.Code, SetStatus: true, Status: store.StatusActive})
	e.expect(e.do("DELETE", "/v1/links/"+v.Code, keyAlice, ""), 204, "")
	if r := e.do("GET", "/"+v.Code, "", ""); r.status != 410 {
		t.Fatalf("after DELETE: got %d; want 410", r.status)
	}
}

func TestOnRedirect(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	e := newEnv(t, func(c *Config) {
		c.OnRedirect = func(ctx *fasthttp.RequestCtx, code []byte) {
			mu.Lock()
			seen = append(seen, string(code))
			mu.Unlock()
		}
	})
	e.w.putLink(t, store.Link{Code: "clicked", URL: "https://example.com/", Owner: "alice"})
	e.w.putLink(t, store.Link{Code: "gonelink", URL: "https://example.com/", Owner: "alice", Status: store.StatusDisabled})
	e.do("GET", "/clicked", "", "")
	e.do("GET", "/clicked", "", "")
	e.do("GET", "/gonelink", "", "")
	e.do("GET", "/unknown", "", "")
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, ",") != "clicked,clicked" {
		t.Fatalf("OnRedirect calls: got %v; want [clicked clicked]", seen)
	}
}

func TestRedirectWithoutCache(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.CacheEntries = -1 })
	e.w.putLink(t, store.Link{Code: "nocache", URL: "https://example.com/n", Owner: "alice"})
	for range 2 {
		if r := e.do("GET", "/nocache", "", ""); r.status != 302 || r.get("Location") != "https://example.com/n" {
			t.Fatalf("got %d Location %q", r.status, r.get("Location"))
		}
	}
	if r := e.do("GET", "/nothere", "", ""); r.status != 404 {
		t.Fatalf("unknown: got %d; want 404", r.status)
	}
}

// FuzzCodeRoute sends arbitrary request targets through the whole router:
// it must never panic and never answer 500.
func FuzzCodeRoute(f *testing.F) {
	st := openStore(f)
	w := newTestWriter(f, st)
	srv, err := New(Config{PublicURL: "http://127.0.0.1:8080", CacheEntries: 256, Logger: discardLogger()}, st, w)
	if err != nil {
		f.Fatal(err)
	}
	w.srv = srv
	w.putLink(f, store.Link{Code: "abc1234", URL: "https://example.com/", Owner: "o"})
	w.putLink(f, store.Link{Code: "review", URL: "https://example.com/r", Owner: "o", Status: store.StatusReview})
	h := srv.Handler()
	for _, s := range []string{"/abc1234", "/review", "/", "/x", "/abc1234/", "/%41bc1234", "/v1/links", "/problems/not-found",
		"/healthz", "//abc", "/../abc1234", "/abc?x=1", "*", "http://host/abc1234", "/\x00", "/" + strings.Repeat("a", 40)} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, target string, head bool) {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("GET")
		if head {
			ctx.Request.Header.SetMethod("HEAD")
		}
		ctx.Request.SetRequestURI(target)
		h(&ctx)
		if code := ctx.Response.StatusCode(); code >= 500 {
			t.Fatalf("target %q: got status %d", target, code)
		}
	})
}
