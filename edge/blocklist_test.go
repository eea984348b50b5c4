package edge

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/waymark/waymark/store"
)

// blocklist commits changes to the store the way the FSM does: the cache
// is not told (the redirect-time check needs no eviction).
func (w *testWriter) blocklist(t testing.TB, changes ...store.BlockChange) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.apply(func(b *store.Batch, _ uint64) error {
		_, _, err := b.UpdateBlocklist(changes)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

func blockEntry(v string) store.BlockChange {
	return store.BlockChange{Entry: store.BlockEntry{Value: v, Kind: store.BlockKindBlock, Reason: "test feed", AddedAt: 1}}
}

func shortenerEntry(v string) store.BlockChange {
	return store.BlockChange{Entry: store.BlockEntry{Value: v, Kind: store.BlockKindShortener, AddedAt: 1}}
}

func unblockEntry(v string) store.BlockChange {
	return store.BlockChange{Remove: true, Entry: store.BlockEntry{Value: v}}
}

// TestCreateRefusesBlocklistedSpellings: every spelling of a blocked
// host, worked out by hand, is refused with 422 naming the entry; near
// misses are created.
func TestCreateRefusesBlocklistedSpellings(t *testing.T) {
	e := newEnv(t, nil)
	e.w.blocklist(t, blockEntry("blocked.example"), blockEntry("10.0.0.1"), blockEntry("192.0.2.0/24"),
		blockEntry("2001:db8:1::/48"), blockEntry("xn--bcher-kva.example"))
	refused := []struct{ url, entry string }{
		{"https://blocked.example/x", "blocked.example"},
		{"https://WWW.Blocked.Example./x", "blocked.example"},
		{"https://a.b.blocked.example:8443/", "blocked.example"},
		{"http://10.0.0.1/", "10.0.0.1"},
		{"http://[::ffff:10.0.0.1]/", "10.0.0.1"}, // the bypass named in issue 11
		{"http://[::FFFF:a00:1]/", "10.0.0.1"},    // 0x0a00, 0x0001
		{"http://[0:0:0:0:0:ffff:10.0.0.1]/", "10.0.0.1"},
		{"http://167772161/", "10.0.0.1"}, // 10 * 2^24 + 1
		{"http://0xa.0.0.1/", "10.0.0.1"},
		{"http://012.0.0.1/", "10.0.0.1"}, // octal 12 = 10
		{"http://10.1/", "10.0.0.1"},      // the last part fills three bytes
		{"http://10.0.0.1./", "10.0.0.1"},
		{"http://192.0.2.77:8080/", "192.0.2.0/24"},
		{"http://[::ffff:192.0.2.1]/", "192.0.2.0/24"},
		{"http://3221225985/", "192.0.2.0/24"}, // 192*2^24 + 2*2^8 + 1 = 192.0.2.1
		{"http://[2001:db8:1:ffff::1]/", "2001:db8:1::/48"},
		{"http://[2001:DB8:1::]/", "2001:db8:1::/48"},
		{"https://b\u00fccher.example/", "xn--bcher-kva.example"},
		{"https://xn--bcher-kva.example/", "xn--bcher-kva.example"},
		{"https://www.B\u00dcCHER.example/", "xn--bcher-kva.example"},
	}
	for _, tt := range refused {
		r := e.do("POST", "/v1/links", keyAlice, fmt.Sprintf(`{"url":%q}`, tt.url))
		if r.status != 422 {
			t.Errorf("%s: got %d %s; want 422", tt.url, r.status, r.body)
			continue
		}
		p := r.problem(t)
		if p.Type != "/problems/"+probDestinationBlocked || !strings.Contains(p.Detail, tt.entry) || !strings.Contains(p.Detail, "test feed") {
			t.Errorf("%s: got %s %q; want destination-blocked naming %s and its reason", tt.url, p.Type, p.Detail, tt.entry)
		}
	}
	for _, ok := range []string{"https://notblocked.example/", "https://blocked.example.org/", "http://10.0.0.2/",
		"http://[::ffff:10.0.0.2]/", "http://192.0.3.1/", "http://[2001:db8:2::1]/", "https://buecher.example/"} {
		e.createLink(keyAlice, fmt.Sprintf(`{"url":%q}`, ok))
	}
}

func TestCreateRefusesShorteners(t *testing.T) {
	e := newEnv(t, nil)
	for _, u := range []string{"https://bit.ly/abc", "https://T.CO/x", "https://www.tinyurl.com/x", "http://goo.gl/x",
		"https://ow.ly/x", "https://is.gd/x", "https://buff.ly/x", "https://rebrand.ly/x", "https://cutt.ly/x", "https://shorturl.at/x"} {
		r := e.do("POST", "/v1/links", keyAlice, fmt.Sprintf(`{"url":%q}`, u))
		e.expect(r, 422, probDestinationBlocked)
		if p := r.problem(t); !strings.Contains(p.Detail, "URL shortener") {
			t.Errorf("%s: detail %q does not say it is a URL shortener", u, p.Detail)
		}
	}
	// Extended through the blocklist.
	e.createLink(keyAlice, `{"url":"https://go.sho.rt/x"}`)
	e.w.blocklist(t, shortenerEntry("sho.rt"))
	r := e.do("POST", "/v1/links", keyAlice, `{"url":"https://go.sho.rt/y"}`)
	e.expect(r, 422, probDestinationBlocked)
	if p := r.problem(t); !strings.Contains(p.Detail, "URL shortener") || !strings.Contains(p.Detail, "sho.rt") {
		t.Errorf("added shortener: detail %q", p.Detail)
	}
}

// TestSelfLinksRefused: every spelling of this service's own host and of
// loopback and unspecified addresses (worked out by hand: 2130706433 =
// 0x7f000001; 0x7f.1 and 0177.0.0.1 and 127.1 are 127.0.0.1; ::ffff:7f00:1
// is ::ffff:127.0.0.1; 0 is 0.0.0.0).
func TestSelfLinksRefused(t *testing.T) {
	e := newEnv(t, nil)
	port := e.addr[strings.LastIndexByte(e.addr, ':')+1:]
	for _, u := range []string{
		e.cfg.PublicURL + "/abc1234",
		"http://localhost:" + port + "/abc1234", "http://LOCALHOST./x", "http://foo.localhost/x",
		"http://127.0.0.1:" + port + "/", "http://127.0.0.2/", "http://127.255.255.254:9/",
		"http://2130706433:" + port + "/", "http://0x7f.1/", "http://0177.0.0.1/", "http://127.1/", "http://0x7f000001/",
		"http://[::1]/", "http://[0:0:0:0:0:0:0:1]:" + port + "/", "http://[::ffff:127.0.0.1]/", "http://[::FFFF:7f00:1]/",
		"http://0.0.0.0/", "http://0/", "http://[::]/", "http://[::ffff:0.0.0.0]/",
	} {
		r := e.do("POST", "/v1/links", keyAlice, fmt.Sprintf(`{"url":%q}`, u))
		e.expect(r, 400, probInvalidURL)
		if p := r.problem(t); !strings.Contains(p.Detail, "service itself") {
			t.Errorf("%s: detail %q", u, p.Detail)
		}
	}
}

// TestSelfLinksOwnAddrs: the public URL's host on any port when it has
// none, and the node's listen addresses in any spelling.
func TestSelfLinksOwnAddrs(t *testing.T) {
	st := openStore(t)
	w := newTestWriter(t, st)
	srv, err := New(Config{PublicURL: "https://wm.example", OwnAddrs: []string{"192.0.2.10:8080", "[2001:db8::10]:8081"},
		ClusterAddrs: func() []string { return []string{"198.51.100.20:8080", "edge2.wm.internal:8080", "0.0.0.0:8081"} },
		Logger:       discardLogger()}, st, w)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		url string
		own bool
	}{
		{"https://wm.example/x", true},
		{"http://WM.EXAMPLE.:8080/x", true},
		{"https://a.wm.example/x", false},
		{"http://192.0.2.10:9999/", true},
		{"http://[::ffff:192.0.2.10]/", true},
		{"http://3221225994/", true}, // 192*2^24 + 2*2^8 + 10
		{"http://0xc0.0.2.10/", true},
		{"http://[2001:DB8:0::10]/", true},
		{"http://192.0.2.11/", false},
		{"http://[2001:db8::11]/", false},
		{"http://[::ffff:198.51.100.20]:9/", true}, // another node, any port
		{"http://3325256724/", true},               // 198*2^24 + 51*2^16 + 100*2^8 + 20
		{"https://EDGE2.wm.internal./x", true},
		{"http://198.51.100.21/", false},
	} {
		d, err := parseDestination(tt.url)
		if err != nil {
			t.Fatalf("%s: %v", tt.url, err)
		}
		if got := srv.isOwnDestination(d); got != tt.own {
			t.Errorf("%s: own %v; want %v", tt.url, got, tt.own)
		}
	}
}

// TestEditRefusesBlocked: PATCH goes through the same check.
func TestEditRefusesBlocked(t *testing.T) {
	e := newEnv(t, nil)
	e.w.blocklist(t, blockEntry("10.0.0.1"))
	v := e.createLink(keyAlice, `{"url":"https://fine.example/"}`)
	for _, tt := range []struct {
		url, problem string
		status       int
	}{
		{"http://[::ffff:10.0.0.1]/", probDestinationBlocked, 422},
		{"https://bit.ly/x", probDestinationBlocked, 422},
		{"https://evil.example/", probDestinationBlocked, 422}, // --blocked-hosts
		{"http://[::ffff:127.0.0.1]/", probInvalidURL, 400},
	} {
		r := e.do("PATCH", "/v1/links/"+v.Code, keyAlice, fmt.Sprintf(`{"url":%q}`, tt.url))
		e.expect(r, tt.status, tt.problem)
	}
	if r := e.do("GET", "/v1/links/"+v.Code, keyAlice, ""); !strings.Contains(string(r.body), "https://fine.example/") {
		t.Errorf("refused edits changed the link: %s", r.body)
	}
}

// TestRedirectStopsForBlockedDestination: a link that is in the cache
// answers 410 with the blocked page as soon as its host is blocked, with
// no eviction, and redirects again once the entry is removed.
func TestRedirectStopsForBlockedDestination(t *testing.T) {
	e := newEnv(t, nil)
	name := e.createLink(keyAlice, `{"url":"https://www.later.example/path"}`)
	ip := e.createLink(keyAlice, `{"url":"http://[::ffff:198.51.100.7]:8080/x"}`)
	other := e.createLink(keyAlice, `{"url":"https://fine.example/"}`)
	review := e.createLink(keyAlice, `{"url":"https://later.example/r"}`)
	e.w.operatorPatch(t, store.LinkPatch{Code: review.Code, SetStatus: true, Status: store.StatusReview})
	for _, c := range []string{name.Code, ip.Code, other.Code} {
		if r := e.do("GET", "/"+c, "", ""); r.status != 302 {
			t.Fatalf("%s before the block: %d", c, r.status)
		}
	}
	hits := counterValue(e.set, "waymark_edge_cache_hits_total")
	if r := e.do("GET", "/"+name.Code, "", ""); r.status != 302 || counterValue(e.set, "waymark_edge_cache_hits_total") != hits+1 {
		t.Fatalf("second GET: %d, cache hits %d -> %d; want a cached 302", r.status, hits, counterValue(e.set, "waymark_edge_cache_hits_total"))
	}
	if r := e.do("GET", "/"+review.Code, "", ""); r.status != 200 {
		t.Fatalf("review before the block: %d", r.status)
	}

	e.w.blocklist(t, blockEntry("later.example"), blockEntry("198.51.100.0/24"))
	hits = counterValue(e.set, "waymark_edge_cache_hits_total")
	for _, c := range []string{name.Code, ip.Code, review.Code} {
		r := e.do("GET", "/"+c, "", "")
		if r.status != 410 || !strings.Contains(string(r.body), "blocklist") || r.get("Location") != "" || r.get("Cache-Control") != "no-store" {
			t.Errorf("%s after the block: %d Location %q Cache-Control %q; want 410, the blocked page, no-store", c, r.status, r.get("Location"), r.get("Cache-Control"))
		}
		if strings.Contains(string(r.body), "later.example/") || strings.Contains(string(r.body), "href=") {
			t.Errorf("%s: the blocked page links to the destination: %s", c, r.body)
		}
	}
	if got := counterValue(e.set, "waymark_edge_cache_hits_total"); got < hits+3 {
		t.Errorf("cache hits %d -> %d: the blocked answers did not come from the cache", hits, got)
	}
	if r := e.do("GET", "/"+other.Code, "", ""); r.status != 302 {
		t.Errorf("unblocked link: %d; want 302", r.status)
	}
	if got := counterValue(e.set, `waymark_redirects_total{result="blocklisted"}`); got != 3 {
		t.Errorf("blocklisted counter %d; want 3", got)
	}

	e.w.blocklist(t, unblockEntry("later.example"))
	if r := e.do("GET", "/"+name.Code, "", ""); r.status != 302 || r.get("Location") != "https://www.later.example/path" {
		t.Errorf("after the removal: %d %q; want the 302 back", r.status, r.get("Location"))
	}
	if r := e.do("GET", "/"+ip.Code, "", ""); r.status != 410 {
		t.Errorf("ip link with its prefix still blocked: %d; want 410", r.status)
	}
}

// TestRedirectBlockCheckAllocatesNothing: a hit on a blocked link, and a
// hit on a fine one under a large blocklist, allocate nothing, also on the
// first request after the blocklist changed.
func TestRedirectBlockCheckAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	srv, w := benchServer(t, Config{})
	w.putLink(t, store.Link{Code: "blocked", URL: "https://www.bad.example/x", Owner: "o"})
	w.putLink(t, store.Link{Code: "ipblock", URL: "http://[::ffff:10.9.8.7]/x", Owner: "o"})
	w.blocklist(t, bigBlocklist(10000)...)
	w.blocklist(t, blockEntry("bad.example"), blockEntry("10.0.0.0/8"))
	h := srv.Handler()
	checkNoAllocs(t, h, []pathStatus{{"/abc1234", 302}, {"/blocked", 410}, {"/ipblock", 410}})
	// The verdict is recomputed once per entry after a change: still no
	// allocation on the hot path itself.
	ctx := requestCtx("GET", "/abc1234")
	bl := srv.st.Blocklist()
	e := srv.cache.get([]byte("abc1234"))
	allocs := testing.AllocsPerRun(100, func() {
		e.blockSeen.Store(0)
		if locationBlocked(bl, e.location) || srv.destBlocked(e) {
			t.Fatal("fine link blocked")
		}
	})
	if allocs != 0 {
		t.Errorf("fresh verdict: %v allocs; want 0", allocs)
	}
	_ = ctx
}

func bigBlocklist(n int) []store.BlockChange {
	out := make([]store.BlockChange, 0, n)
	for i := range n {
		out = append(out, blockEntry("feed-"+strconv.Itoa(i)+".example"))
	}
	return out
}

// TestRedirectBlockCheckConcurrent: redirects on many goroutines while the
// blocklist flips (run with -race); every answer is the redirect or the
// blocked page, and the last state wins once the flips stop.
func TestRedirectBlockCheckConcurrent(t *testing.T) {
	srv, w := benchServer(t, Config{})
	h := srv.Handler()
	done := make(chan struct{})
	errs := make(chan string, 4)
	for range 4 {
		go func() {
			ctx := requestCtx("GET", "/abc1234")
			for {
				select {
				case <-done:
					errs <- ""
					return
				default:
				}
				ctx.Response.Reset()
				h(ctx)
				if s := ctx.Response.StatusCode(); s != 302 && s != 410 {
					errs <- fmt.Sprintf("status %d", s)
					return
				}
			}
		}()
	}
	for i := range 50 {
		if i%2 == 0 {
			w.blocklist(t, blockEntry("example.com"))
		} else {
			w.blocklist(t, unblockEntry("example.com"))
		}
	}
	close(done)
	for range 4 {
		if e := <-errs; e != "" {
			t.Fatal(e)
		}
	}
	ctx := requestCtx("GET", "/abc1234")
	if !serveOnce(h, ctx, 302) { // the last flip removed the entry
		t.Fatalf("after the flips: %d; want 302", ctx.Response.StatusCode())
	}
	w.blocklist(t, blockEntry("example.com"))
	if !serveOnce(h, ctx, 410) {
		t.Fatalf("blocked: %d; want 410", ctx.Response.StatusCode())
	}
}
