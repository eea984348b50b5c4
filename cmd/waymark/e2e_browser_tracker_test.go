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
	"math"
	"os"
	"path/filepath"
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
