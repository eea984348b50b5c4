package main

// Browser end-to-end tests of the tracker, ingest/s.js (issue 9 C): each
// behaviour is checked in a real headless Chromium against a real `waymark
// node --dev`, three ways: what the page's own code saw the tracker send
// (testdata/browser/capture.js), what the browser put on the network (the
// DevTools protocol), and what the node stored (`waymark events tail`).
//
// Chromium under chromedp reports navigator.webdriver = true, which the
// tracker ignores as Plausible's does; the tests opt in the way Plausible's
// own test setups do (window.__plausible there, window.__waymark here, set
// before any script by allowAutomation), except TestE2EBrowserTrackerExclusions,
// which checks the exclusion itself.

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// engagementSlackMS is how far the engaged time an engagement reports may
// be from the page's own clock between the pageview and the engagement:
// both are read in the same JavaScript task as the send, so only a
// preempted renderer makes them differ.
const engagementSlackMS = 50

// dwellMS is how long the visitor stays on each page, so that a wrong
// engaged time (since load, or zero) is far outside engagementSlackMS.
const dwellMS = 300

// sentStep is one request the tracker should send: event name and path.
type sentStep struct{ name, path, via string }

// checkSent checks the requests recorded in the page, in the order the
// tracker made them, against want.
func checkSent(t *testing.T, got []pageSend, want []sentStep) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("the tracker sent %d requests; want %d", len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		g, w := got[i], want[i]
		if g.Body.Name != w.name || g.Body.path() != w.path || g.Via != w.via {
			t.Errorf("request %d: got %s %s by %s; want %s %s by %s", i, g.Body.Name, g.Body.path(), g.Via, w.name, w.path, w.via)
		}
	}
	if t.Failed() {
		t.Logf("sent in the page: %s", describeSent(got))
	}
}

func describeSent(sent []pageSend) string {
	s := ""
	for i, p := range sent {
		e, sd := "-", "-"
		if p.Body.E != nil {
			e = fmt.Sprint(*p.Body.E)
		}
		if p.Body.SD != nil {
			sd = fmt.Sprint(*p.Body.SD)
		}
		s += fmt.Sprintf("\n  %d. %s %s %s e=%s sd=%s props=%v at=%.0f prerendering=%v %s", i, p.Via, p.Body.Name, p.Body.URL, e, sd, p.Body.Props, p.At, p.Prerendering, p.Visibility)
	}
	return s
}

// checkEngagement checks an engagement against the pageview of its page:
// the page was visible and focused all along, so the engaged time is the
// page clock's time between the two, and the depth is wantDepth.
func checkEngagement(t *testing.T, what string, pv, eng pageSend, wantDepth int) {
	t.Helper()
	shown := eng.At - pv.At
	switch {
	case eng.Body.E == nil || eng.Body.SD == nil:
		t.Errorf("%s: engagement without e or sd", what)
	case math.Abs(*eng.Body.E-shown) > engagementSlackMS:
		t.Errorf("%s: engaged time %v ms; want the %v ms the page was shown (±%d)", what, *eng.Body.E, shown, engagementSlackMS)
	case int(*eng.Body.SD) != wantDepth:
		t.Errorf("%s: scroll depth %v; want %d", what, *eng.Body.SD, wantDepth)
	}
}

// pageGeometry is what Plausible's scroll depth needs of a page: the
// deepest point seen (scroll offset plus viewport) over the page height.
type pageGeometry struct {
	ScrollY     float64 `json:"scrollY"`
	InnerHeight float64 `json:"innerHeight"`
	Height      float64 `json:"height"`
}

func geometry(ctx context.Context, t *testing.T) pageGeometry {
	t.Helper()
	g, err := chromedp.Run(ctx, chromedp.Evaluate[pageGeometry](`({scrollY: window.scrollY, innerHeight: window.innerHeight,
		height: Math.max(document.documentElement.scrollHeight, document.body.scrollHeight)})`))
	if err != nil {
		t.Fatalf("cannot measure the page: %v", err)
	}
	return g
}

// depth is the scroll depth, in percent, of a visitor whose deepest scroll
// offset was deepestY.
func (g pageGeometry) depth(deepestY float64) int {
	return int(math.Round(100 * math.Min(g.Height, deepestY+g.InnerHeight) / g.Height))
}

// pollPage evaluates cond in the page until it is true. It polls from the
// test rather than with chromedp.Poll, because a page restored from the
// back/forward cache runs in an execution context chromedp does not track.
func pollPage(ctx context.Context, t *testing.T, br *headlessBrowser, what, cond string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](cond))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 15s for %s (%s): %v\n%s", what, cond, err, br.diagnostics())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stay keeps the visitor on the current page until the page's clock says
// dwellMS have passed since the tracker's last request.
func stay(ctx context.Context, t *testing.T, br *headlessBrowser) {
	t.Helper()
	pollPage(ctx, t, br, "the visitor to read the page", fmt.Sprintf(`window.__sent.length > 0 && Date.now() - window.__sent[window.__sent.length-1].at >= %d`, dwellMS))
}

// checkNetwork checks that every request the browser sent to /api/event
// was accepted and none was dropped. DevTools may not report the answer
// to a beacon sent as the page is being left (the tab shows another
// document by then); the node's count of stored events covers those.
func checkNetwork(t *testing.T, reqs []*eventRequest) {
	t.Helper()
	for i, r := range reqs {
		unanswered := !r.done && r.resourceType == network.ResourceTypePing
		if !unanswered && (r.status != 202 || r.dropped != "" || r.failed != "") {
			t.Errorf("request %d (%s): got status %d, dropped %q, failed %q; want 202, nothing dropped", i, r.body.Name, r.status, r.dropped, r.failed)
		}
	}
}

// TestE2EBrowserTrackerSPA loads a small single-page app that includes
// /s.js, navigates three times (two pushState links and the back button,
// with a same-path replaceState in between that must not count), then
// hides the page. Each navigation sends the previous page's engagement
// (its time on page and scroll depth) before the new pageview, and the
// raw store holds four pageviews and four engagements, without query
// strings.
func TestE2EBrowserTrackerSPA(t *testing.T) {
	br := startBrowser(t)
	br.allowAutomation(t)
	n := startTrackedNode(t)
	const domain = "127.0.0.1" // the Origin host of the site server's pages
	siteID := n.createSite(t, domain)
	site := startSiteServer(t, n.base, domain, "")

	ctx, cancel := context.WithTimeout(br.ctx, 45*time.Second)
	defer cancel()
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, br.diagnostics())
		}
	}
	showing := func(path string) chromedp.Action[chromedp.Void] {
		return chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#view[data-path=%q]`, path)))
	}

	step("load the app", chromedp.Navigate(site.URL+"/"), showing("/"))
	br.waitRequests(t, 1)
	top := geometry(ctx, t) // every view of this app has the same height
	stay(ctx, t, br)
	step("follow the Products link", chromedp.Click(chromedp.CSS("#nav-products")), showing("/products"))
	br.waitRequests(t, 3)
	stay(ctx, t, br)
	// Same path, new query: an SPA rewriting its state is not a pageview.
	step("sort (replaceState)", chromedp.Click(chromedp.CSS("#sort")),
		chromedp.WaitVisible(chromedp.CSS(`#view[data-url="/products?sort=price"]`)))
	step("follow the Product 42 link", chromedp.Click(chromedp.CSS("#nav-product")), showing("/products/42"))
	br.waitRequests(t, 5)
	step("scroll to the bottom", evaluate("window.scrollTo(0, document.body.scrollHeight)"))
	pollPage(ctx, t, br, "the scroll event", "window.__scrollY + window.innerHeight >= document.documentElement.scrollHeight")
	stay(ctx, t, br)
	step("go back (popstate)", evaluate("history.back()"), showing("/products"))
	br.waitRequests(t, 7)
	back := geometry(ctx, t) // the browser restores the scroll offset of /products
	stay(ctx, t, br)

	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	shotDir := t.TempDir()
	if dir := os.Getenv("WAYMARK_E2E_ARTIFACTS"); dir != "" {
		shotDir = dir // kept after the test, for CI artifacts
	}
	shotPath := filepath.Join(shotDir, "spa.png")
	if err := os.WriteFile(shotPath, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the SPA: %s (%d bytes)", shotPath, len(shot))

	br.hidePage(ctx, t)
	reqs := br.waitRequests(t, 8)
	checkNetwork(t, reqs)
	sent := pageSent(ctx, t, br.diagnostics)
	// Pageviews go by XHR; engagements by sendBeacon, which outlives the page.
	checkSent(t, sent, []sentStep{
		{"pageview", "/", "xhr"}, {"engagement", "/", "beacon"},
		{"pageview", "/products", "xhr"}, {"engagement", "/products", "beacon"},
		{"pageview", "/products/42", "xhr"}, {"engagement", "/products/42", "beacon"},
		{"pageview", "/products", "xhr"}, {"engagement", "/products", "beacon"},
	})
	if len(sent) == 8 {
		checkEngagement(t, "/", sent[0], sent[1], top.depth(0))
		checkEngagement(t, "/products", sent[2], sent[3], top.depth(0))
		checkEngagement(t, "/products/42 (scrolled to the bottom)", sent[4], sent[5], 100)
		checkEngagement(t, "/products again", sent[6], sent[7], back.depth(back.ScrollY))
	}
	for i, r := range reqs {
		if r.body.Name == "engagement" && r.resourceType != network.ResourceTypePing {
			t.Errorf("request %d: engagement went as a %q request; want %q (navigator.sendBeacon)", i, r.resourceType, network.ResourceTypePing)
		}
	}
	if t.Failed() {
		t.Fatalf("the browser did not send what it should have%s\n%s", describeSent(sent), br.diagnostics())
	}

	t.Logf("browser %s", br.sent())
	n.waitSiteEvents(t, siteID, 8, br.diagnostics)
	br.close(t)
	n.assertSiteEvents(t, siteID, map[string]int{
		"pageview /":              1,
		"pageview /products":      2,
		"pageview /products/42":   1,
		"engagement /":            1,
		"engagement /products":    2,
		"engagement /products/42": 1,
	})
}

// TestE2EBrowserTrackerHashRouting loads an app that routes by
// location.hash with data-hash: every route is a page of its own, sent
// with "h": 1 and stored with its fragment, and each route change (a link,
// the back button) sends the previous route's engagement first.
func TestE2EBrowserTrackerHashRouting(t *testing.T) {
	br := startBrowser(t)
	br.allowAutomation(t)
	n := startTrackedNode(t)
	const domain = "127.0.0.1"
	siteID := n.createSite(t, domain)
	site := startSiteServer(t, n.base, domain, "")

	ctx, cancel := context.WithTimeout(br.ctx, 45*time.Second)
	defer cancel()
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, br.diagnostics())
		}
	}
	showing := func(route string) chromedp.Action[chromedp.Void] {
		return chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#view[data-route=%q]`, route)))
	}

	step("load the app", chromedp.Navigate(site.URL+"/spa-hash.html"), showing("#/"))
	br.waitRequests(t, 1)
	g := geometry(ctx, t)
	stay(ctx, t, br)
	step("follow the Pricing link", chromedp.Click(chromedp.CSS("#nav-pricing")), showing("#/pricing"))
	br.waitRequests(t, 3)
	stay(ctx, t, br)
	step("follow the Docs link", chromedp.Click(chromedp.CSS("#nav-docs")), showing("#/docs"))
	br.waitRequests(t, 5)
	stay(ctx, t, br)
	// Back fires popstate and hashchange: one pageview.
	step("go back", evaluate("history.back()"), showing("#/pricing"))
	br.waitRequests(t, 7)
	stay(ctx, t, br)
	br.hidePage(ctx, t)
	reqs := br.waitRequests(t, 8)
	checkNetwork(t, reqs)

	sent := pageSent(ctx, t, br.diagnostics)
	checkSent(t, sent, []sentStep{
		{"pageview", "/spa-hash.html", "xhr"}, {"engagement", "/spa-hash.html", "beacon"},
		{"pageview", "/spa-hash.html", "xhr"}, {"engagement", "/spa-hash.html", "beacon"},
		{"pageview", "/spa-hash.html", "xhr"}, {"engagement", "/spa-hash.html", "beacon"},
		{"pageview", "/spa-hash.html", "xhr"}, {"engagement", "/spa-hash.html", "beacon"},
	})
	wantRoutes := []string{"", "", "#/pricing", "#/pricing", "#/docs", "#/docs", "#/pricing", "#/pricing"}
	for i, s := range sent[:min(len(sent), len(wantRoutes))] {
		if _, frag, _ := cutFragment(s.Body.URL); frag != wantRoutes[i] {
			t.Errorf("request %d (%s): URL %s; want the route %q", i, s.Body.Name, s.Body.URL, wantRoutes[i])
		}
		if s.Body.H == nil || *s.Body.H != 1 {
			t.Errorf("request %d (%s): h = %v; want 1 (hash mode)", i, s.Body.Name, s.Body.H)
		}
	}
	if len(sent) == 8 {
		for i := 0; i < 8; i += 2 {
			checkEngagement(t, wantRoutes[i+1], sent[i], sent[i+1], g.depth(0))
		}
	}
	if t.Failed() {
		t.Fatalf("the browser did not send what it should have%s\n%s", describeSent(sent), br.diagnostics())
	}

	n.waitSiteEvents(t, siteID, 8, br.diagnostics)
	br.close(t)
	n.assertSiteEvents(t, siteID, map[string]int{
		"pageview /spa-hash.html":            1,
		"pageview /spa-hash.html#/pricing":   2,
		"pageview /spa-hash.html#/docs":      1,
		"engagement /spa-hash.html":          1,
		"engagement /spa-hash.html#/pricing": 2,
		"engagement /spa-hash.html#/docs":    1,
	})
}

// cutFragment splits a URL at its '#'.
func cutFragment(u string) (string, string, bool) {
	for i := 0; i < len(u); i++ {
		if u[i] == '#' {
			return u[:i], u[i:], true
		}
	}
	return u, "", false
}

// TestE2EBrowserTrackerBFCache leaves a page for another one and comes back
// with the back button: Chromium restores the page from its back/forward
// cache (pageshow with persisted), which Plausible counts as a new
// pageview with a new engagement period. Leaving sends the engagement of
// the first period; the restored page reports only its own time.
func TestE2EBrowserTrackerBFCache(t *testing.T) {
	br := startBrowser(t)
	br.allowAutomation(t)
	n := startTrackedNode(t)
	const domain = "127.0.0.1"
	siteID := n.createSite(t, domain)
	site := startSiteServer(t, n.base, domain, "")

	ctx, cancel := context.WithTimeout(br.ctx, 45*time.Second)
	defer cancel()
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, br.diagnostics())
		}
	}
	step("load the page", chromedp.Navigate(site.URL+"/bfcache.html"), chromedp.WaitVisible(chromedp.CSS("#view")))
	br.waitRequests(t, 1)
	g := geometry(ctx, t)
	stay(ctx, t, br)
	step("leave it", chromedp.Click(chromedp.CSS("#away")), chromedp.WaitVisible(chromedp.CSS("#elsewhere")))
	// history.back() restores the page without a load event.
	step("go back", evaluate("history.back()"))
	pollPage(ctx, t, br, "the page restored from the back/forward cache", "window.__restores === 1")
	stay(ctx, t, br)
	br.hidePage(ctx, t)
	pollPage(ctx, t, br, "the engagement of the restored page", "window.__sent.length >= 4")

	// The page's own record survives in the cache; DevTools does not see
	// the beacon a page sends while it enters the cache, the node does.
	sent := pageSent(ctx, t, br.diagnostics)
	checkSent(t, sent, []sentStep{
		{"pageview", "/bfcache.html", "xhr"}, {"engagement", "/bfcache.html", "beacon"},
		{"pageview", "/bfcache.html", "xhr"}, {"engagement", "/bfcache.html", "beacon"},
	})
	if len(sent) == 4 {
		checkEngagement(t, "before leaving", sent[0], sent[1], g.depth(0))
		checkEngagement(t, "after the restore", sent[2], sent[3], g.depth(0))
	}
	if t.Failed() {
		t.Fatalf("the browser did not send what it should have%s\n%s", describeSent(sent), br.diagnostics())
	}
	n.waitSiteEvents(t, siteID, 4, br.diagnostics)
	br.mu.Lock()
	reqs := slices.Clone(br.order)
	br.mu.Unlock()
	checkNetwork(t, reqs)
	br.close(t)
	n.assertSiteEvents(t, siteID, map[string]int{
		"pageview /bfcache.html":   2,
		"engagement /bfcache.html": 2,
	})
}

// TestE2EBrowserTrackerExclusions checks the tracker's two exclusions, as
// Plausible's: it sends nothing from an automated browser
// (navigator.webdriver, which chromedp's Chromium reports) unless the page
// sets window.__waymark, and nothing from localhost, 127.x or a file: page
// unless the script tag has data-local. Custom events are dropped too,
// their callback still called. The page with both opt-ins is counted, and
// it is the only thing the node stores.
func TestE2EBrowserTrackerExclusions(t *testing.T) {
	br := startBrowser(t)
	n := startTrackedNode(t)
	const domain = "127.0.0.1"
	siteID := n.createSite(t, domain)
	site := startSiteServer(t, n.base, domain, "")

	ctx, cancel := context.WithTimeout(br.ctx, 45*time.Second)
	defer cancel()
	// ignored loads url, waits for the tracker to start, sends a custom
	// event and checks that the page sent nothing.
	ignored := func(what, url string) {
		t.Helper()
		err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("#view")))
		if err != nil {
			t.Fatalf("%s: load %s: %v\n%s", what, url, err, br.diagnostics())
		}
		pollPage(ctx, t, br, "the tracker to start", "typeof window.waymark === 'function'")
		called, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`new Promise(function (done) {
			waymark('signup', { callback: function () { done(true); } });
		})`, chromedp.EvalAwaitPromise))
		if err != nil || !called {
			t.Errorf("%s: waymark('signup') did not call its callback: %v", what, err)
		}
		if sent := pageSent(ctx, t, br.diagnostics); len(sent) != 0 {
			t.Errorf("%s: the tracker sent %d requests; want none%s", what, len(sent), describeSent(sent))
		}
	}

	webdriver, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("navigator.webdriver === true"))
	if err != nil || !webdriver {
		t.Fatalf("this Chromium does not report navigator.webdriver (%v): the automation exclusion cannot be tested", err)
	}
	ignored("automated browser, data-local", site.URL+"/local.html")

	br.allowAutomation(t)
	port := site.URL[len("http://127.0.0.1:"):]
	ignored("127.0.0.1 without data-local", site.URL+"/nolocal.html")
	ignored("localhost without data-local", "http://localhost:"+port+"/nolocal.html")
	page, err := fillPage("nolocal.html", siteConfig{waymark: n.base, domain: domain}, site.URL)
	if err != nil {
		t.Fatal(err)
	}
	file := t.TempDir() + "/nolocal.html"
	if err := os.WriteFile(file, page, 0o644); err != nil {
		t.Fatal(err)
	}
	ignored("file: page without data-local", "file://"+file)
	if br.requestCount() != 0 {
		t.Fatalf("the browser sent requests to /api/event from ignored pages\n%s", br.diagnostics())
	}

	// Both opt-ins: the pageview, the custom event and the engagement
	// count. The custom event goes through Plausible's name for the call.
	err = chromedp.Do(ctx, chromedp.Navigate(site.URL+"/local.html"), chromedp.WaitVisible(chromedp.CSS("#view")),
		evaluate(`new Promise(function (done) { plausible('signup', { props: { plan: 'pro' }, callback: done }); })`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("load local.html with the automation opt-in: %v\n%s", err, br.diagnostics())
	}
	br.waitRequests(t, 2)
	br.hidePage(ctx, t)
	checkNetwork(t, br.waitRequests(t, 3))
	checkSent(t, pageSent(ctx, t, br.diagnostics), []sentStep{
		{"pageview", "/local.html", "xhr"}, {"signup", "/local.html", "xhr"}, {"engagement", "/local.html", "beacon"},
	})
	if t.Failed() {
		t.Fatalf("%s", br.diagnostics())
	}
	n.waitSiteEvents(t, siteID, 3, br.diagnostics)
	br.close(t)
	n.assertSiteEvents(t, siteID, map[string]int{"pageview /local.html": 1, "custom signup /local.html": 1, "engagement /local.html": 1})
}

// externalSite is another web site, the target of outbound links.
type externalSite struct {
	*httptest.Server
	mu   sync.Mutex
	hits []string // request URIs
}

func startExternalSite(t *testing.T) *externalSite {
	t.Helper()
	s := &externalSite{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits = append(s.hits, r.URL.RequestURI())
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, `<!doctype html><title>Partner</title><h1 id="landing">Another web site</h1>`)
	}))
	t.Cleanup(s.Close)
	return s
}

// waitHits waits until the site has answered n requests for uri.
func (s *externalSite) waitHits(t *testing.T, uri string, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d requests for %s on the other site", n, uri), 15*time.Second, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		c := 0
		for _, h := range s.hits {
			if h == uri {
				c++
			}
		}
		return c >= n
	})
}

// TestE2EBrowserTrackerLinks checks the opt-in link events of Plausible's
// enhanced script: with data-outbound-links, a click (or middle click) on
// a link to another host sends "Outbound Link: Click" with props {url: the
// link}; with data-file-downloads, a click on a link to a file of a listed
// type sends "File Download" with props {url: the link without its query}.
// The events go by sendBeacon, so the browser still follows the link at
// once. Without the attributes, the same clicks send nothing.
func TestE2EBrowserTrackerLinks(t *testing.T) {
	br := startBrowser(t)
	br.allowAutomation(t)
	n := startTrackedNode(t)
	const domain = "127.0.0.1"
	siteID := n.createSite(t, domain)
	ext := startExternalSite(t)
	site := startSite(t, siteConfig{waymark: n.base, domain: domain, external: ext.URL})

	ctx, cancel := context.WithTimeout(br.ctx, 45*time.Second)
	defer cancel()
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, br.diagnostics())
		}
	}
	middleClick := func(sel string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			nodes, err := chromedp.Nodes(chromedp.CSS(sel), chromedp.NodeVisible)(ctx, tg)
			if err != nil {
				return err
			}
			_, err = chromedp.MouseClickNode(nodes[0], chromedp.ButtonMiddle)(ctx, tg)
			return err
		})
	}

	// Without the opt-in attributes: the links work and send nothing.
	step("load local.html", chromedp.Navigate(site.URL+"/local.html"), chromedp.WaitVisible(chromedp.CSS("#view")))
	br.waitRequests(t, 1)
	step("download without data-file-downloads", chromedp.Click(chromedp.CSS("#download")))
	site.waitHit(t, "/files/price-list.pdf", br.diagnostics)
	checkSent(t, pageSent(ctx, t, br.diagnostics), []sentStep{{"pageview", "/local.html", "xhr"}})
	step("outbound link without data-outbound-links", chromedp.Click(chromedp.CSS("#outbound")), chromedp.WaitVisible(chromedp.CSS("#landing")))
	ext.waitHits(t, "/landing?from=local", 1)

	// With them.
	step("load links.html", chromedp.Navigate(site.URL+"/links.html"), chromedp.WaitVisible(chromedp.CSS("#view")))
	pollPage(ctx, t, br, "the pageview of links.html", "window.__sent.length === 1")
	step("download (click on the link's label)", chromedp.Click(chromedp.CSS("#download-label")))
	site.waitHit(t, "/files/report.pdf", br.diagnostics)
	step("follow a link within the page", chromedp.Click(chromedp.CSS("#section")))
	pollPage(ctx, t, br, "the page to follow its own link", "location.hash === '#details'")
	step("middle click on the outbound link", middleClick("#outbound"))
	ext.waitHits(t, "/landing?from=links", 1) // in a new tab
	sent := pageSent(ctx, t, br.diagnostics)
	checkSent(t, sent, []sentStep{
		{"pageview", "/links.html", "xhr"}, {"File Download", "/links.html", "beacon"}, {"Outbound Link: Click", "/links.html", "beacon"},
	})
	if len(sent) == 3 {
		if got, want := sent[1].Body.Props["url"], site.URL+"/files/report.pdf"; got != want {
			t.Errorf("File Download url %q; want %q (the link without its query)", got, want)
		}
		if got, want := sent[2].Body.Props["url"], ext.URL+"/landing?from=links"; got != want {
			t.Errorf("Outbound Link: Click url %q; want %q", got, want)
		}
	}
	// A plain click: the event, and the browser leaves for the other site.
	step("click on the outbound link", chromedp.Click(chromedp.CSS("#outbound")), chromedp.WaitVisible(chromedp.CSS("#landing")))
	ext.waitHits(t, "/landing?from=links", 2)
	if loc, err := chromedp.Run(ctx, chromedp.Location()); err != nil || loc != ext.URL+"/landing?from=links" {
		t.Errorf("after the click the tab shows %q (%v); want %s", loc, err, ext.URL+"/landing?from=links")
	}
	var outbound []*eventRequest
	br.mu.Lock()
	for _, r := range br.order {
		if r.body.Name == "Outbound Link: Click" {
			outbound = append(outbound, r)
		}
	}
	br.mu.Unlock()
	if len(outbound) != 2 {
		t.Errorf("the browser sent %d outbound-link events; want 2 (middle click, click)", len(outbound))
	} else if got, want := outbound[1].body.Props["url"], ext.URL+"/landing?from=links"; got != want || outbound[1].resourceType != network.ResourceTypePing {
		t.Errorf("outbound click sent url %q as a %q request; want %q by sendBeacon", got, outbound[1].resourceType, want)
	}
	if t.Failed() {
		t.Fatalf("the browser did not send what it should have%s\n%s", describeSent(sent), br.diagnostics())
	}

	// Leaving each page for the other site sent its engagement.
	n.waitSiteEvents(t, siteID, 7, br.diagnostics)
	br.mu.Lock()
	reqs := slices.Clone(br.order)
	br.mu.Unlock()
	checkNetwork(t, reqs)
	br.close(t)
	n.assertSiteEvents(t, siteID, map[string]int{
		"pageview /local.html":                    1,
		"engagement /local.html":                  1,
		"pageview /links.html":                    1,
		"custom File Download /links.html":        1,
		"custom Outbound Link: Click /links.html": 2,
		"engagement /links.html":                  1,
	})
}
