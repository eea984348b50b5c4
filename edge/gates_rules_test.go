package edge

import (
	"strings"
	"sync/atomic"
	"testing"
)

// TestGatedLinksFollowTheirRules: a link with a password or a preview and
// redirect rules sends the unlocked visitor, or the browser that is not a
// crawler, where the rules say, as a link without the gate would.
func TestGatedLinksFollowTheirRules(t *testing.T) {
	var clicks atomic.Int64
	e := newEnv(t, clickCounter(&clicks))
	const rules = `"rules":[{"if":{"query":{"ref":"qr"}},"url":"https://print.example/qr"}]`
	e.createLink(keyAlice, `{"url":"https://main.example/","alias":"pwr","password":"open sesame",`+rules+`}`)
	e.createLink(keyAlice, `{"url":"https://main.example/","alias":"pvr","preview":{"title":"T"},`+rules+`}`)

	cases := []struct {
		name, path, wantPrefix string
	}{
		{"unlocked, rule matches", "/pwr?ref=qr", "https://print.example/qr"},
		{"unlocked, no rule matches", "/pwr?ref=web", "https://main.example/"},
	}
	for _, c := range cases {
		r := e.unlock("127.0.0.1", c.path, "open sesame")
		if r.status != 302 || !strings.HasPrefix(r.get("Location"), c.wantPrefix) {
			t.Errorf("%s: got %d Location %q; want 302 to %s", c.name, r.status, r.get("Location"), c.wantPrefix)
		}
	}
	r := e.do("GET", "/pvr?ref=qr", "", "", "User-Agent", browserUA)
	if r.status != 302 || !strings.HasPrefix(r.get("Location"), "https://print.example/qr") {
		t.Errorf("preview link, browser, rule matches: got %d Location %q; want the rule's destination", r.status, r.get("Location"))
	}
	r = e.do("GET", "/pvr?ref=qr", "", "", "User-Agent", crawlerUAs[0])
	if r.status != 200 || !strings.Contains(string(r.body), `og:title`) {
		t.Errorf("preview link, crawler: got %d; want the preview page", r.status)
	}
	if got := clicks.Load(); got != 4 { // two unlocks, the browser, the crawler
		t.Errorf("clicks: got %d; want 4", got)
	}
}
