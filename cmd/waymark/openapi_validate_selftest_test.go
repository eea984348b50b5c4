package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSpecValidatorCatchesDrift points the validator at a server on
// 127.0.0.1 that answers like Waymark but wrong in one way each, and
// checks that every wrong answer, undocumented status and request outside
// the description is reported: the e2e validation cannot pass by
// accident.
func TestSpecValidatorCatchesDrift(t *testing.T) {
	link := `{"code":"abc","short_url":"http://x/abc","url":"https://example.com/","redirect":302,"expires_at":null,"click_limit":null,"status":"active","created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z","forward_query":true,"tags":[],"rules":[],"password_protected":false,"preview":null}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/links/good":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(link))
		case "/v1/links/extra-field":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(strings.Replace(link, `"code"`, `"owner":"alice","code"`, 1)))
		case "/v1/links/bad-status":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(strings.Replace(link, `"active"`, `"paused"`, 1)))
		case "/v1/links/teapot":
			w.WriteHeader(http.StatusTeapot)
		case "/v1/links/wrong-problem":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"type":"/problems/invalid-url","title":"Invalid URL","status":404}`))
		case "/oa-perm":
			w.Header().Set("Location", "https://example.com/")
			w.Header().Set("Cache-Control", "public, max-age=3600")
			w.WriteHeader(http.StatusMovedPermanently) // without Referrer-Policy
		case "/oa-r308":
			w.Header().Set("Location", "https://example.com/")
			w.Header().Set("Cache-Control", "forever")
			w.Header().Set("Referrer-Policy", "strict-origin-when-cross-origin")
			w.WriteHeader(http.StatusPermanentRedirect)
		case "/oa-303":
			w.Header().Set("Location", "https://example.com/")
			w.WriteHeader(http.StatusSeeOther)
		case "/v1/links":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusTooManyRequests) // without Retry-After
			w.Write([]byte(`{"type":"/problems/rate-limited","title":"Rate limited","status":429}`))
		}
	}))
	defer srv.Close()
	v := newSpecValidator(t, srv.URL)
	v.send(t, "GET", srv.URL+"/v1/links/good", "k", "")
	if len(v.errs) != 0 {
		t.Fatalf("a good answer was reported: %v", v.errs)
	}
	cases := []struct {
		method, path, body, want string
		opts                     []func(*http.Request) *http.Request
	}{
		{"GET", "/v1/links/extra-field", "", "owner", nil},
		{"GET", "/v1/links/bad-status", "", "paused", nil},
		{"GET", "/v1/links/teapot", "", "418", nil},
		{"GET", "/v1/links/wrong-problem", "", "invalid-url", nil},
		{"POST", "/v1/links", `{"url":"https://example.com/"}`, "Retry-After", nil},
		{"POST", "/v1/links", `{"url":"https://example.com/","colour":"red"}`, "colour", nil},
		{"POST", "/v1/links", `{"url":"https://example.com/"}`, "description accepts it", []func(*http.Request) *http.Request{invalid}},
		{"PUT", "/v1/links/good", "", "no operation", nil},
		{"GET", "/oa-perm", "", "Referrer-Policy", nil},
		{"HEAD", "/oa-perm", "", "Referrer-Policy", nil},
		{"GET", "/oa-r308", "", "Cache-Control", nil},
		{"GET", "/oa-303", "", "303", nil},
		{"HEAD", "/v1/links/teapot", "", "no operation", nil},
	}
	for _, c := range cases {
		v.send(t, c.method, srv.URL+c.path, "k", c.body, c.opts...)
		v.mu.Lock()
		errs := strings.Join(v.errs, "\n")
		v.errs = nil
		v.mu.Unlock()
		if !strings.Contains(errs, c.want) {
			t.Errorf("%s %s: want a report mentioning %q; got %q", c.method, c.path, c.want, errs)
		}
	}
}
