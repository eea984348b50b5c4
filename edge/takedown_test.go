package edge

import (
	"encoding/json"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/store"
)

// Every 3xx carries Referrer-Policy: strict-origin-when-cross-origin (the
// destination may learn the short link's origin, never the code); the
// pages keep no-referrer. 301/308 are public for --permanent-max-age at
// most (1 h by default), and never past the link's expiry.
func TestRedirectReferrerPolicyAndPermanentCap(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.PermanentMaxAge = 10 * time.Minute })
	expiring := e.clock.Now().Add(90 * time.Second).UnixMilli()
	tests := []struct {
		code     string
		redirect uint16
		expires  int64
		cc       string
	}{
		{"perm301", 301, 0, "public, max-age=600"},
		{"perm308", 308, 0, "public, max-age=600"},
		{"temp302", 302, 0, "private, max-age=60"},
		{"temp307", 307, 0, "private, max-age=60"},
		{"perm301x", 301, expiring, "public, max-age=90"},
		{"temp302x", 302, expiring, "private, max-age=60"},
	}
	for _, tt := range tests {
		e.w.putLink(t, store.Link{Code: tt.code, URL: "https://example.com/" + tt.code, Owner: "alice", Redirect: tt.redirect, ExpiresAt: tt.expires})
		for _, pass := range []string{"miss", "hit"} {
			status, h := e.rawGet("/" + tt.code)
			if !strings.Contains(status, " "+string(rune('0'+tt.redirect/100))+string(rune('0'+tt.redirect/10%10))+string(rune('0'+tt.redirect%10))+" ") {
				t.Fatalf("%s (%s): status line %q; want %d", tt.code, pass, status, tt.redirect)
			}
			if h["Referrer-Policy"] != "strict-origin-when-cross-origin" {
				t.Errorf("%s (%s): Referrer-Policy %q; want strict-origin-when-cross-origin", tt.code, pass, h["Referrer-Policy"])
			}
			if h["Cache-Control"] != tt.cc {
				t.Errorf("%s (%s): Cache-Control %q; want %q", tt.code, pass, h["Cache-Control"], tt.cc)
			}
		}
	}
	e.w.putLink(t, store.Link{Code: "gone001", URL: "https://example.com/", Owner: "alice", Status: store.StatusDisabled})
	if r := e.do("GET", "/gone001", "", ""); r.status != 410 || r.get("Referrer-Policy") != "no-referrer" {
		t.Errorf("410 page: got %d Referrer-Policy %q; want 410 no-referrer", r.status, r.get("Referrer-Policy"))
	}
}

// The default cap is one hour.
func TestPermanentMaxAgeDefault(t *testing.T) {
	e := newEnv(t, nil)
	e.w.putLink(t, store.Link{Code: "perm001", URL: "https://example.com/p", Owner: "alice", Redirect: 301})
	if r := e.do("GET", "/perm001", "", ""); r.get("Cache-Control") != "public, max-age=3600" {
		t.Fatalf("301 Cache-Control: %q; want public, max-age=3600", r.get("Cache-Control"))
	}
}

// HEAD answers with GET's status line and headers (without a body) for
// every kind of answer, and never counts as a click.
func TestHeadAnswersLikeGetWithoutAClick(t *testing.T) {
	var clicks atomic.Int64
	e := newEnv(t, func(c *Config) {
		c.OnRedirect = func(*fasthttp.RequestCtx, []byte) { clicks.Add(1) }
	})
	e.w.putLink(t, store.Link{Code: "head302", URL: "https://example.com/h", Owner: "alice"})
	e.w.putLink(t, store.Link{Code: "head301", URL: "https://example.com/p", Owner: "alice", Redirect: 301})
	e.w.putLink(t, store.Link{Code: "headblk", URL: "https://bad.example/x", Owner: "alice", Status: store.StatusBlocked})
	e.w.putLink(t, store.Link{Code: "headlgl", URL: "https://bad.example/x", Owner: "alice", Status: store.StatusLegalBlock})
	e.w.putLink(t, store.Link{Code: "headrev", URL: "https://bad.example/x", Owner: "alice", Status: store.StatusReview})
	e.w.putLink(t, store.Link{Code: "headoff", URL: "https://bad.example/x", Owner: "alice", Status: store.StatusDisabled})
	want := map[string]string{"head302": "302", "head301": "301", "headblk": "410", "headlgl": "451", "headrev": "200", "headoff": "410", "headnone": "404"}
	for code, status := range want {
		for _, order := range [][2]string{{"HEAD", "GET"}, {"GET", "HEAD"}} { // a miss and a hit each
			got := map[string]map[string]string{}
			lines := map[string]string{}
			for _, m := range order {
				line, h := e.rawRequest(m + " /" + code + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
				delete(h, "Date")
				got[m], lines[m] = h, line
			}
			if !strings.Contains(lines["GET"], " "+status+" ") || lines["HEAD"] != lines["GET"] {
				t.Errorf("%s: HEAD %q, GET %q; want both %s", code, lines["HEAD"], lines["GET"], status)
			}
			if !maps.Equal(got["HEAD"], got["GET"]) {
				t.Errorf("%s: headers differ\nHEAD %v\n GET %v", code, got["HEAD"], got["GET"])
			}
		}
	}
	// Two GETs of each redirect (one per order) are the only clicks.
	if n := clicks.Load(); n != 4 {
		t.Fatalf("clicks: %d; want 4 (2 GETs each of 2 redirects, no HEAD)", n)
	}
	for range 5 {
		e.do("HEAD", "/head302", "", "")
	}
	if n := clicks.Load(); n != 4 {
		t.Fatalf("clicks after 5 more HEADs: %d; want still 4", n)
	}
}

// Bait and switch: an edit that changes the destination shows the review
// interstitial (to the new destination) for --edit-review, then redirects;
// an edit that keeps the destination opens no window.
func TestEditReviewWindow(t *testing.T) {
	var clicks atomic.Int64
	e := newEnv(t, func(c *Config) {
		c.EditReview = time.Hour
		c.OnRedirect = func(*fasthttp.RequestCtx, []byte) { clicks.Add(1) }
	})
	v := e.createLink(keyAlice, `{"url":"https://example.com/harmless"}`)
	if r := e.do("GET", "/"+v.Code, "", ""); r.status != 302 {
		t.Fatalf("fresh link: %d; want 302 (creates are not reviewed)", r.status)
	}
	r := e.do("PATCH", "/v1/links/"+v.Code, keyAlice, `{"url":"https://example.com/switched"}`)
	e.expect(r, 200, "")
	var got linkView
	json.Unmarshal(r.body, &got)
	wantUntil := formatMillis(e.clock.Now().Add(time.Hour).UnixMilli())
	if got.ReviewUntil == nil || *got.ReviewUntil != wantUntil {
		t.Fatalf("review_until after the edit: %v; want %s", got.ReviewUntil, wantUntil)
	}
	for _, pass := range []string{"miss", "hit"} {
		r := e.do("GET", "/"+v.Code, "", "")
		body := string(r.body)
		if r.status != 200 || r.get("Location") != "" || !strings.Contains(body, `href="https://example.com/switched"`) || !strings.Contains(body, "Continue") {
			t.Fatalf("in the window (%s): %d Location %q; want 200 and the interstitial to the new destination\n%s", pass, r.status, r.get("Location"), body)
		}
		if r.get("Cache-Control") != "no-store" {
			t.Errorf("interstitial Cache-Control %q; want no-store", r.get("Cache-Control"))
		}
	}
	if clicks.Load() != 1 {
		t.Errorf("clicks: %d; want 1 (the interstitial is no click)", clicks.Load())
	}
	e.clock.Advance(time.Hour - time.Millisecond)
	if r := e.do("GET", "/"+v.Code, "", ""); r.status != 200 {
		t.Fatalf("1 ms before the window ends: %d; want 200", r.status)
	}
	e.clock.Advance(time.Millisecond)
	hits := counterValue(e.set, "waymark_edge_cache_hits_total")
	if r := e.do("GET", "/"+v.Code, "", ""); r.status != 302 || r.get("Location") != "https://example.com/switched" {
		t.Fatalf("after the window: %d Location %q; want 302 to the new destination", r.status, r.get("Location"))
	}
	if counterValue(e.set, "waymark_edge_cache_hits_total") != hits+1 {
		t.Errorf("the window's end was not served from the cached entry")
	}
	// Same destination (after normalisation) and other fields: no window.
	e.expect(e.do("PATCH", "/v1/links/"+v.Code, keyAlice, `{"url":"https://EXAMPLE.com:443/switched","click_limit":9}`), 200, "")
	if r := e.do("GET", "/"+v.Code, "", ""); r.status != 302 {
		t.Fatalf("after an edit keeping the destination: %d; want 302", r.status)
	}
}

func TestEditReviewDisabled(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.EditReview = -1 })
	v := e.createLink(keyAlice, `{"url":"https://example.com/a"}`)
	e.expect(e.do("PATCH", "/v1/links/"+v.Code, keyAlice, `{"url":"https://example.com/b"}`), 200, "")
	if r := e.do("GET", "/"+v.Code, "", ""); r.status != 302 || r.get("Location") != "https://example.com/b" {
		t.Fatalf("edit with the window disabled: %d %q; want 302 to the new destination", r.status, r.get("Location"))
	}
}

// An edit's destination goes through the same check as a create's
// (checkDestination): a blocked host or the service itself is refused
// with the same problem, and nothing changes. (The status of
// destination-blocked is the blocklist work's to set.)
func TestEditDestinationCheckedLikeCreate(t *testing.T) {
	e := newEnv(t, nil)
	v := e.createLink(keyAlice, `{"url":"https://example.com/a"}`)
	for _, tt := range []struct{ url, problem string }{
		{"https://sub.evil.example/x", "destination-blocked"},
		{"http://" + e.addr + "/abc", "invalid-url"},
	} {
		body := `{"url":"` + tt.url + `"}`
		created := e.do("POST", "/v1/links", keyAlice, body)
		e.expect(created, created.status, tt.problem)
		e.expect(e.do("PATCH", "/v1/links/"+v.Code, keyAlice, body), created.status, tt.problem)
		if created.status < 400 {
			t.Fatalf("create of %s: %d; want a refusal", tt.url, created.status)
		}
	}
	if r := e.do("GET", "/"+v.Code, "", ""); r.status != 302 || r.get("Location") != "https://example.com/a" {
		t.Fatalf("after refused edits: %d %q; want the old redirect", r.status, r.get("Location"))
	}
}

// An operator status cannot be lifted by the owner's PATCH or DELETE; the
// owner's history endpoint shows every change with its actor and is 404
// for another owner.
func TestOwnerCannotLiftTakedownAndSeesHistory(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.EditReview = -1 })
	v := e.createLink(keyAlice, `{"url":"https://example.com/a"}`)
	e.expect(e.do("PATCH", "/v1/links/"+v.Code, keyAlice, `{"url":"https://example.com/b"}`), 200, "")
	e.w.operatorPatch(t, store.LinkPatch{Code: v.Code, UpdatedAt: 5, SetStatus: true, Status: store.StatusBlocked, Reason: "malware"})
	e.expect(e.do("PATCH", "/v1/links/"+v.Code, keyAlice, `{"status":"active"}`), 409, "link-locked")
	e.expect(e.do("PATCH", "/v1/links/"+v.Code, keyAlice, `{"url":"https://example.com/c"}`), 409, "link-locked")
	e.expect(e.do("DELETE", "/v1/links/"+v.Code, keyAlice, ""), 409, "link-locked")
	if r := e.do("GET", "/"+v.Code, "", ""); r.status != 410 || !strings.Contains(string(r.body), "blocked") {
		t.Fatalf("after the owner's attempts: %d; want 410 blocked page", r.status)
	}

	r := e.do("GET", "/v1/links/"+v.Code+"/history", keyAlice, "")
	e.expect(r, 200, "")
	var hist struct {
		Code    string        `json:"code"`
		History []HistoryView `json:"history"`
	}
	if err := json.Unmarshal(r.body, &hist); err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, h := range hist.History {
		actions = append(actions, h.Actor+":"+h.Action)
	}
	if hist.Code != v.Code || strings.Join(actions, " ") != "alice:create alice:edit operator:block" {
		t.Fatalf("history: %s; want alice:create alice:edit operator:block", r.body)
	}
	if b := hist.History[2]; b.Reason != "malware" || len(b.Changes) != 1 || b.Changes[0] != (store.FieldChange{Field: "status", Old: "active", New: "blocked"}) {
		t.Errorf("block record: %+v", b)
	}
	if e := hist.History[1].Changes; len(e) != 1 || e[0] != (store.FieldChange{Field: "url", Old: "https://example.com/a", New: "https://example.com/b"}) {
		t.Errorf("edit record changes: %+v", e)
	}
	e.expect(e.do("GET", "/v1/links/"+v.Code+"/history", keyBob, ""), 404, "not-found")
	e.expect(e.do("GET", "/v1/links/nosuchcode/history", keyAlice, ""), 404, "not-found")
	e.expect(e.do("GET", "/v1/links/"+v.Code+"/history", "", ""), 401, "")
	e.expect(e.do("POST", "/v1/links/"+v.Code+"/history", keyAlice, ""), 405, "")
}
