package edge

import (
	"bytes"
	"testing"

	"github.com/waymark/waymark/store"
)

// TestAppendMergedQuery: each want is worked out by hand from the rule in
// query.go.
func TestAppendMergedQuery(t *testing.T) {
	for _, tc := range []struct{ dest, visit, want string }{
		{"https://d.example/p", "utm_source=tw", "https://d.example/p?utm_source=tw"},
		{"https://d.example/p?a=1", "b=2", "https://d.example/p?a=1&b=2"},
		{"https://d.example/p?a=1&b=2", "b=3", "https://d.example/p?a=1&b=3"},                 // the visit wins
		{"https://d.example/p?b=2&a=1", "b=3&c=4", "https://d.example/p?a=1&b=3&c=4"},         // the destination's order, then the visit's
		{"https://d.example/p?a=1#top", "x=y", "https://d.example/p?a=1&x=y#top"},             // the fragment stays last
		{"https://d.example/p#top", "x=y", "https://d.example/p?x=y#top"},                     // no query of its own
		{"https://d.example/p?a=1&&b", "b&&c=", "https://d.example/p?a=1&b&c="},               // empty parameters dropped; a key alone is a key
		{"https://d.example/p?tag=a&tag=b", "tag=c&tag=d", "https://d.example/p?tag=c&tag=d"}, // a repeated key is replaced as a whole
		{"https://d.example/p?q=%20", "q=+", "https://d.example/p?q=+"},                       // nothing re-encoded
		{"https://d.example/p?A=1", "a=2", "https://d.example/p?A=1&a=2"},                     // keys are byte for byte
		{"https://d.example/p?a=1", "&&", "https://d.example/p?a=1"},                          // nothing to add
		{"https://d.example/p?", "a=1", "https://d.example/p?a=1"},
		{"https://d.example/p?a=1&b=2#top", "utm_source=tw&b=3", "https://d.example/p?a=1&utm_source=tw&b=3#top"}, // the README's example
	} {
		if got := string(appendMergedQuery(nil, []byte(tc.dest), []byte(tc.visit))); got != tc.want {
			t.Errorf("%s + ?%s:\n got %s\nwant %s", tc.dest, tc.visit, got, tc.want)
		}
	}
}

func FuzzAppendMergedQuery(f *testing.F) {
	f.Add("https://d.example/p?a=1#f", "a=2&b")
	f.Fuzz(func(t *testing.T, dest, visit string) {
		got := appendMergedQuery(nil, []byte(dest), []byte(visit))
		// Every visit parameter is in the answer.
		for p := range params([]byte(visit)) {
			if !bytes.Contains(got, p) {
				t.Fatalf("%q + %q = %q: lost %q", dest, visit, got, p)
			}
		}
	})
}

// TestRedirectForwardsQuery: the cached redirect merges the visit's query
// into Location unless the link turned forwarding off; without a query the
// destination goes out byte for byte.
func TestRedirectForwardsQuery(t *testing.T) {
	srv, w := benchServer(t, Config{})
	w.putLink(t, store.Link{Code: "fwd", URL: "https://d.example/p?a=1#top", Owner: "o", Redirect: 302})
	w.putLink(t, store.Link{Code: "nofwd", URL: "https://d.example/p?a=1", Owner: "o", Redirect: 302, NoForwardQuery: true})
	h := srv.Handler()
	for _, tc := range []struct{ path, want string }{
		{"/fwd", "https://d.example/p?a=1#top"},
		{"/fwd?utm_source=tw&a=2", "https://d.example/p?utm_source=tw&a=2#top"},
		{"/fwd?utm_source=tw", "https://d.example/p?a=1&utm_source=tw#top"}, // a cache hit now
		{"/nofwd?utm_source=tw", "https://d.example/p?a=1"},
	} {
		ctx := requestCtx("GET", tc.path)
		if !serveOnce(h, ctx, 302) {
			t.Fatalf("%s: status %d", tc.path, ctx.Response.StatusCode())
		}
		if got := string(ctx.Response.Header.Peek("Location")); got != tc.want {
			t.Errorf("%s: Location %s; want %s", tc.path, got, tc.want)
		}
	}
	checkNoAllocs(t, h, []pathStatus{{"/fwd", 302}, {"/fwd?utm_source=tw&utm_medium=social", 302}, {"/nofwd?x=1", 302}})
}

func BenchmarkRedirectCacheHitQuery(b *testing.B) {
	srv, _ := benchServer(b, Config{})
	benchServe(b, srv.Handler(), "/abc1234?utm_source=newsletter&utm_medium=email", 302)
}

// TestForwardQueryThroughTheAPI: forward_query defaults to true, can be
// turned off at create and toggled by PATCH (the cache follows), and
// anything but a boolean is refused with nothing changed.
func TestForwardQueryThroughTheAPI(t *testing.T) {
	e := newEnv(t, nil)
	on := e.createLink(keyAlice, `{"url":"https://example.com/a"}`)
	off := e.createLink(keyAlice, `{"url":"https://example.com/b","forward_query":false}`)
	if !on.ForwardQuery || off.ForwardQuery {
		t.Fatalf("forward_query: got %v and %v; want true (default) and false", on.ForwardQuery, off.ForwardQuery)
	}
	location := func(code string) string {
		t.Helper()
		r := e.do("GET", "/"+code+"?ref=qr", "", "")
		if r.status != 302 {
			t.Fatalf("GET %s: %d", code, r.status)
		}
		return r.get("Location")
	}
	if got := location(on.Code); got != "https://example.com/a?ref=qr" {
		t.Errorf("forwarding link: Location %s", got)
	}
	if got := location(off.Code); got != "https://example.com/b" {
		t.Errorf("link without forwarding: Location %s", got)
	}
	r := e.do("PATCH", "/v1/links/"+off.Code, keyAlice, `{"forward_query":true}`)
	e.expect(r, 200, "")
	if got := location(off.Code); got != "https://example.com/b?ref=qr" {
		t.Errorf("after PATCH forward_query true: Location %s", got)
	}
	for _, body := range []string{`{"forward_query":null}`, `{"forward_query":"no"}`, `{"forward_query":0}`} {
		e.expect(e.do("PATCH", "/v1/links/"+off.Code, keyAlice, body), 400, "invalid-request")
		e.expect(e.do("POST", "/v1/links", keyAlice, `{"url":"https://example.com/c",`+body[1:]), 400, "invalid-request")
	}
	if got := location(off.Code); got != "https://example.com/b?ref=qr" {
		t.Errorf("after refused edits: Location %s; want it unchanged", got)
	}
	h, err := e.st.LinkHistory(off.Code, 0)
	if err != nil || len(h) != 2 || len(h[1].Changes) != 1 || h[1].Changes[0] != (store.FieldChange{Field: "forward_query", Old: "false", New: "true"}) {
		t.Errorf("history: %+v, %v; want the create and a forward_query false -> true edit", h, err)
	}
}
