package edge

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/waymark/waymark/store"
)

func TestWebhookAddrPublic(t *testing.T) {
	for _, c := range []struct {
		addr   string
		public bool
	}{
		{"93.184.215.14", true}, {"2606:4700::1111", true}, {"8.8.8.8", true},
		{"127.0.0.1", false}, {"127.9.9.9", false}, {"::1", false}, {"10.0.0.1", false}, {"172.16.5.4", false},
		{"192.168.1.1", false}, {"169.254.169.254", false}, {"fe80::1", false}, {"fc00::1", false},
		{"0.0.0.0", false}, {"::", false}, {"100.64.1.1", false}, {"224.0.0.1", false}, {"::ffff:127.0.0.1", false},
		{"::ffff:10.1.1.1", false}, {"255.255.255.255", false}, {"203.0.113.9", false}, {"2001:db8::1", false},
	} {
		if got := WebhookAddrPublic(netip.MustParseAddr(c.addr)); got != c.public {
			t.Errorf("%s: public %v; want %v", c.addr, got, c.public)
		}
	}
}

func TestDecodeWebhookRequest(t *testing.T) {
	u, ev, err := DecodeWebhookRequest([]byte(`{"url":" https://h.example/in ","events":["link.created","link.clicked","link.created"]}`))
	if err != nil || u != "https://h.example/in" || ev != store.EventLinkCreated|store.EventLinkClicked {
		t.Fatalf("got %q %v %v", u, ev, err)
	}
	for _, body := range []string{``, `[]`, `{"events":["link.created"]}`, `{"url":"https://h.example/","events":[]}`,
		`{"url":"https://h.example/","events":["link.nope"]}`, `{"url":"mailto:a@b","events":["link.created"]}`,
		`{"url":"https://u:p@h.example/","events":["link.created"]}`, `{"url":"https://h.example/","events":["link.created"],"secret":"x"}`,
		`{"url":"https://h.example/","events":["link.created"]} {}`, `{"url":"https://h.example/` + strings.Repeat("a", 2048) + `","events":["link.created"]}`} {
		if _, _, err := DecodeWebhookRequest([]byte(body)); err == nil {
			t.Errorf("%.80s: accepted", body)
		}
	}
}

func FuzzDecodeWebhookRequest(f *testing.F) {
	f.Add([]byte(`{"url":"https://h.example/in","events":["link.created"]}`))
	f.Add([]byte(`{"url":"http://[::1]:80/","events":["link.clicked","link.blocked"]}`))
	f.Add([]byte(`{"url":null,"events":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		u, ev, err := DecodeWebhookRequest(b)
		if err != nil {
			return
		}
		if ev == 0 || ev&^store.AllWebhookEvents != 0 {
			t.Fatalf("events %#x accepted", ev)
		}
		w := store.Webhook{Owner: "o", URL: u, Events: ev, Secret: "whsec_0123456789abcdef"}
		if err := store.CheckWebhook(&w); err != nil {
			t.Fatalf("accepted a webhook the store refuses: %v", err)
		}
		if _, err := ParseWebhookURL(u); err != nil {
			t.Fatalf("accepted URL %q fails its own check: %v", u, err)
		}
	})
}

// A webhook is a feed of what it subscribes to, so making one needs the
// scopes that read it besides links:write: links:write alone must not
// become a way to read links, nor links:read a way to read clicks.
func TestWebhookCreateNeedsReadScopes(t *testing.T) {
	e := newEnv(t, nil)
	writeOnly := e.makeKey(keyAlice, `{"name":"w","scopes":["links:write"]}`)
	links := e.makeKey(keyAlice, `{"name":"rw","scopes":["links:read","links:write"]}`)
	all := e.makeKey(keyAlice, `{"name":"rws","scopes":["links:read","links:write","stats:read"]}`)
	// A public address literal: no DNS, and past the private-target check.
	const created = `{"url":"https://93.184.216.34/hook","events":["link.created"]}`
	const clicked = `{"url":"https://93.184.216.34/hook","events":["link.created","link.clicked"]}`
	cases := []struct {
		key, body string
		status    int
		problem   string
		lacks     string // what the refusal must name
	}{
		{writeOnly.Key, created, 403, "insufficient-scope", "links:read"},
		{links.Key, clicked, 403, "insufficient-scope", "stats:read"},
		{writeOnly.Key, clicked, 403, "insufficient-scope", "links:read, stats:read"},
		// Past the scope check, this test server has no webhook writer: 503.
		{links.Key, created, 503, "unavailable", ""},
		{all.Key, clicked, 503, "unavailable", ""},
	}
	for _, tc := range cases {
		r := e.do("POST", "/v1/webhooks", tc.key, tc.body)
		e.expect(r, tc.status, tc.problem)
		if d := r.problem(t).Detail; tc.lacks != "" && !strings.HasSuffix(d, "lacks "+tc.lacks) {
			t.Errorf("%s: detail %q does not end with lacks %s", tc.body, d, tc.lacks)
		}
	}
}
