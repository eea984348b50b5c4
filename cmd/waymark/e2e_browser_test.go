package main

// Browser end-to-end tests (issue 4): a real headless Chromium, Debian's
// chromium package driven by chromedp, loads pages from the test's own web
// site on 127.0.0.1:0 (another origin than the Waymark node, as a customer's
// site would be) and the trackers on those pages post to a real
// `waymark node --dev`. The node has every role, so it ships its segments
// to itself and `waymark events count|tail` read its raw store.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromiumPath is where Debian's chromium package (and .ci/install-browser.sh)
// puts the browser.
const chromiumPath = "/usr/bin/chromium"

// The official Plausible trackers on npm, pinned: the current package and
// the older one that many sites still bundle.
const (
	plausibleTrackerPkg       = "@plausible-analytics/tracker@0.4.6"
	plausibleTrackerLegacyPkg = "plausible-tracker@0.3.9"
)

// requireTool skips the test when a tool it needs is missing, except in CI
// (CI=true), where a missing tool is a broken setup and fails the test.
func requireTool(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: failing instead of skipping)", msg)
	}
	t.Skip(msg)
}

// TestE2EBrowserTrackerSPA loads a small single-page app that includes
// /s.js, navigates three times (two pushState links and the back button,
// with a same-path replaceState in between that must not count), hides
// the page, and checks that the raw store holds exactly the four pageviews
// and one engagement event, with paths and without query strings.
func TestE2EBrowserTrackerSPA(t *testing.T) {
	br := startBrowser(t)
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
	step("follow the Products link", chromedp.Click(chromedp.CSS("#nav-products")), showing("/products"))
	br.waitRequests(t, 2)
	// Same path, new query: an SPA rewriting its state is not a pageview.
	step("sort (replaceState)", chromedp.Click(chromedp.CSS("#sort")),
		chromedp.WaitVisible(chromedp.CSS(`#view[data-url="/products?sort=price"]`)))
	step("follow the Product 42 link", chromedp.Click(chromedp.CSS("#nav-product")), showing("/products/42"))
	br.waitRequests(t, 3)
	step("scroll to the bottom", evaluate("window.scrollTo(0, document.body.scrollHeight)"))
	step("go back (popstate)", evaluate("history.back()"), showing("/products"))
	br.waitRequests(t, 4)

	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
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
	reqs := br.waitRequests(t, 5)

	// What the browser sent: four pageviews by XHR, then the engagement by
	// sendBeacon (a "Ping" request), every one accepted and none dropped.
	wantSent := []struct{ name, path string }{
		{"pageview", "/"}, {"pageview", "/products"}, {"pageview", "/products/42"},
		{"pageview", "/products"}, {"engagement", "/products"},
	}
	for i, r := range reqs {
		if r.body.Name != wantSent[i].name || r.path() != wantSent[i].path {
			t.Errorf("request %d: got %s %s; want %s %s", i, r.body.Name, r.path(), wantSent[i].name, wantSent[i].path)
		}
		if r.status != 202 || r.dropped != "" || r.failed != "" {
			t.Errorf("request %d (%s): got status %d, dropped %q, failed %q; want 202, nothing dropped", i, r.body.Name, r.status, r.dropped, r.failed)
		}
	}
	if eng := reqs[4]; eng.resourceType != network.ResourceTypePing {
		t.Errorf("engagement went as a %q request; want %q (navigator.sendBeacon)", eng.resourceType, network.ResourceTypePing)
	} else if eng.body.E == nil || eng.body.SD == nil || *eng.body.E <= 0 || *eng.body.SD <= 0 || *eng.body.SD > 100 {
		t.Errorf("engagement body %s: want e > 0 and 0 < sd <= 100", eng.raw)
	}
	if t.Failed() {
		t.Fatalf("the browser did not send what it should have\n%s", br.diagnostics())
	}

	t.Logf("browser %s", br.sent())
	n.waitSiteEvents(t, siteID, 5, br.diagnostics)
	br.close(t)
	n.assertSiteEvents(t, siteID, map[string]int{
		"pageview /":            1,
		"pageview /products":    2,
		"pageview /products/42": 1,
		"engagement /products":  1,
	})
}

// TestE2EBrowserPlausibleTracker points Plausible's official trackers from
// npm (the current @plausible-analytics/tracker and the older
// plausible-tracker) at Waymark, and checks that their pageviews, custom
// events and engagement land in the raw store.
func TestE2EBrowserPlausibleTracker(t *testing.T) {
	br := startBrowser(t)
	vendor := installPlausibleTrackers(t)
	n := startTrackedNode(t)
	const domain = "127.0.0.1"
	siteID := n.createSite(t, domain)
	site := startSiteServer(t, n.base, domain, vendor)

	ctx, cancel := context.WithTimeout(br.ctx, 45*time.Second)
	defer cancel()
	sent := 0
	for _, page := range []string{"/plausible-legacy.html", "/plausible.html"} {
		err := chromedp.Do(ctx, chromedp.Navigate(site.URL+page),
			chromedp.WaitVisible(chromedp.CSS("#status")),
			void(chromedp.Poll[bool](`document.getElementById('status').textContent === 'tracking'`, chromedp.WithPollingTimeout(10*time.Second))),
		)
		if err != nil {
			t.Fatalf("load %s: %v\n%s", page, err, br.diagnostics())
		}
		sent++
		br.waitRequests(t, sent) // the pageview
		if err := chromedp.Do(ctx, evaluate("signup()", chromedp.EvalAwaitPromise)); err != nil {
			t.Fatalf("custom event on %s: %v\n%s", page, err, br.diagnostics())
		}
		sent++
		br.waitRequests(t, sent)
	}
	// The current tracker reports engagement when the page is hidden.
	br.hidePage(ctx, t)
	sent++
	reqs := br.waitRequests(t, sent)

	wantSent := []struct{ name, path string }{
		{"pageview", "/plausible-legacy.html"}, {"signup", "/plausible-legacy.html"},
		{"pageview", "/plausible.html"}, {"signup", "/plausible.html"}, {"engagement", "/plausible.html"},
	}
	for i, r := range reqs {
		if r.body.Name != wantSent[i].name || r.path() != wantSent[i].path {
			t.Errorf("request %d: got %s %s; want %s %s", i, r.body.Name, r.path(), wantSent[i].name, wantSent[i].path)
		}
		if r.status != 202 || r.dropped != "" || r.failed != "" {
			t.Errorf("request %d (%s): got status %d, dropped %q, failed %q; want 202, nothing dropped", i, r.body.Name, r.status, r.dropped, r.failed)
		}
	}
	if t.Failed() {
		t.Fatalf("the trackers did not send what they should have\n%s", br.diagnostics())
	}

	t.Logf("browser %s", br.sent())
	n.waitSiteEvents(t, siteID, len(wantSent), br.diagnostics)
	br.close(t)
	n.assertSiteEvents(t, siteID, map[string]int{
		"pageview /plausible-legacy.html": 1,
		"custom /plausible-legacy.html":   1,
		"pageview /plausible.html":        1,
		"custom /plausible.html":          1,
		"engagement /plausible.html":      1,
	})
}

// evaluate runs a JavaScript expression in the page for its side effect.
func evaluate(expr string, opts ...chromedp.EvaluateOption) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](expr, opts...)
}

// void drops the value of an action, so it can run in chromedp.Do.
func void[T any](a chromedp.Action[T]) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := a(ctx, t)
		return chromedp.Void{}, err
	}
}

// trackedNode is a `waymark node --dev`: edge, ingest and aggregator in one.
type trackedNode struct {
	p    *proc
	base string // http://127.0.0.1:port
	key  string // the dev owner's API key
}

func startTrackedNode(t *testing.T) *trackedNode {
	t.Helper()
	dir := t.TempDir()
	p := startNode(t, dir, "--dev", "--http-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0")
	n := &trackedNode{p: p, base: "http://" + p.http}
	waitFor(t, "readyz", 30*time.Second, func() bool { return do(t, "GET", n.base+"/readyz", "", "").status == 200 })
	waitFor(t, "dev-api-key", 30*time.Second, func() bool {
		n.key = readKeyMaybe(filepath.Join(dir, "dev-api-key"))
		return n.key != ""
	})
	return n
}

func (n *trackedNode) createSite(t *testing.T, domain string) string {
	t.Helper()
	r := do(t, "POST", n.base+"/v1/sites", n.key, fmt.Sprintf(`{"domain":%q,"timezone":"UTC"}`, domain))
	if r.status != 201 {
		t.Fatalf("create site %s: got %d %s; want 201", domain, r.status, r.body)
	}
	id, _ := r.json(t)["id"].(string)
	if id == "" {
		t.Fatalf("create site %s: no id in %s", domain, r.body)
	}
	return id
}

// cliEnv points the CLI at the node's operator API.
func (n *trackedNode) cliEnv(t *testing.T) []string {
	return []string{"WAYMARK_ADMIN_ADDR=" + n.p.admin, "WAYMARK_TOKEN=" + readKey(t, filepath.Join(n.p.dataDir, "operator-token"))}
}

// waitSiteEvents polls `waymark events count --site` until the raw store
// holds want events of the site. More than want fails at once.
func (n *trackedNode) waitSiteEvents(t *testing.T, siteID string, want int, diag func() string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := eventsCount(t, n.p, "--site", siteID)
		switch {
		case got == want:
			return
		case got > want:
			t.Fatalf("raw events of site %s: got %d; want %d\n%s", siteID, got, want, n.tail(t, siteID))
		case time.Now().After(deadline):
			t.Fatalf("raw events of site %s: got %d after 20s; want %d\n%s\nnode log:\n%s", siteID, got, want, diag(), lastLines(n.p.logs(), 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tailEvent is what the tests read of `waymark events tail -format json`.
type tailEvent struct {
	Kind string `json:"kind"`
	Site string `json:"site"`
	Name string `json:"name"`
	Path string `json:"path"`
	Bot  bool   `json:"bot"`
}

func (n *trackedNode) tail(t *testing.T, siteID string) string {
	t.Helper()
	out, errOut, code := runCLI(t, n.cliEnv(t), "events", "tail", "--site", siteID, "-n", "50", "-format", "json")
	if code != 0 {
		t.Fatalf("events tail: exit %d: %s", code, errOut)
	}
	return out
}

// assertSiteEvents checks, once the node has shipped everything it wrote
// and the browser is gone, that the raw store holds exactly want: "kind
// path" keys with their counts.
func (n *trackedNode) assertSiteEvents(t *testing.T, siteID string, want map[string]int) {
	t.Helper()
	waitFor(t, "node shipped every event it wrote", 20*time.Second, func() bool { return shippedAll(t, n.base) })
	total := 0
	for _, c := range want {
		total += c
	}
	if got := eventsCount(t, n.p, "--site", siteID); got != total {
		t.Fatalf("raw events of site %s: got %d; want exactly %d\n%s", siteID, got, total, n.tail(t, siteID))
	}
	raw := n.tail(t, siteID)
	var evs []tailEvent
	if err := json.Unmarshal([]byte(raw), &evs); err != nil {
		t.Fatalf("events tail -format json: %v: %s", err, raw)
	}
	got := map[string]int{}
	var listing strings.Builder
	for _, ev := range evs {
		got[ev.Kind+" "+ev.Path]++
		fmt.Fprintf(&listing, "  %s %s %s bot=%v\n", ev.Kind, ev.Name, ev.Path, ev.Bot)
		if strings.Contains(ev.Path, "?") {
			t.Errorf("stored path %q keeps a query string", ev.Path)
		}
		if ev.Site != siteID {
			t.Errorf("event of site %q in the tail of site %s", ev.Site, siteID)
		}
		// HeadlessChrome is a headless browser: stored, flagged as a bot.
		if !ev.Bot {
			t.Errorf("%s %s from HeadlessChrome: got bot=false; want true", ev.Kind, ev.Path)
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("raw store of site %s: got %v; want %v", siteID, got, want)
	}
	if bots := eventsCount(t, n.p, "--site", siteID, "--bots"); bots != total {
		t.Errorf("bot-flagged events: got %d; want %d", bots, total)
	}
	t.Logf("raw store of site %s (events tail):\n%s", siteID, listing.String())
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// installPlausibleTrackers installs the pinned Plausible tracker packages
// with npm into a temporary folder and returns it.
func installPlausibleTrackers(t *testing.T) string {
	t.Helper()
	npm, err := exec.LookPath("npm")
	if err != nil {
		requireTool(t, "npm is not installed, so Plausible's tracker cannot be fetched: %v", err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--prefix", dir, "--no-audit", "--no-fund", "--ignore-scripts",
		"--loglevel", "error", plausibleTrackerPkg, plausibleTrackerLegacyPkg)
	if out, err := cmd.CombinedOutput(); err != nil {
		requireTool(t, "npm install %s %s failed: %v\n%s", plausibleTrackerPkg, plausibleTrackerLegacyPkg, err, out)
	}
	return dir
}

// startSiteServer serves the customer's site: the pages of
// testdata/browser with the Waymark node's origin and the site domain
// filled in, /vendor/ from the npm folder, and spa.html for every other
// path (client-side routing).
func startSiteServer(t *testing.T, waymarkOrigin, domain, vendorDir string) *httptest.Server {
	t.Helper()
	page := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "browser", name))
		if err != nil {
			t.Fatal(err)
		}
		s := strings.ReplaceAll(string(b), "__WAYMARK_ORIGIN__", waymarkOrigin)
		return []byte(strings.ReplaceAll(s, "__SITE_DOMAIN__", domain))
	}
	pages := map[string][]byte{
		"/plausible.html":        page("plausible.html"),
		"/plausible-legacy.html": page("plausible-legacy.html"),
	}
	spa := page("spa.html")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if rest, ok := strings.CutPrefix(r.URL.Path, "/vendor/"); ok {
			if vendorDir == "" {
				http.NotFound(w, r)
				return
			}
			file := filepath.Join(vendorDir, filepath.FromSlash(path.Clean("/"+rest)))
			if _, err := os.Stat(file); err != nil && path.Ext(rest) == "" {
				file += ".js" // an ES import without extension, as bundlers resolve it
			}
			http.ServeFile(w, r, file)
			return
		}
		body, ok := pages[r.URL.Path]
		if !ok {
			body = spa
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// eventRequest is one request to /api/event as the browser saw it.
type eventRequest struct {
	resourceType network.ResourceType
	raw          string
	body         struct {
		Name string   `json:"n"`
		URL  string   `json:"u"`
		E    *float64 `json:"e"`
		SD   *float64 `json:"sd"`
	}
	status  int64
	dropped string // X-Waymark-Dropped
	failed  string // network error, CORS or the like
	done    bool
}

// path is the path of the page the event names, as the tracker sent it.
func (r *eventRequest) path() string {
	u := r.body.URL
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
		if j := strings.IndexByte(u, '/'); j >= 0 {
			u = u[j:]
		} else {
			u = "/"
		}
	}
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		u = u[:i]
	}
	return u
}

// headlessBrowser is one headless Chromium with one tab, and a record of
// what the tab sent to /api/event and wrote to its console.
type headlessBrowser struct {
	ctx      context.Context // the tab
	dataDir  string
	cmd      *exec.Cmd // the browser process, leader of its process group
	mu       sync.Mutex
	requests map[network.RequestID]*eventRequest
	order    []*eventRequest
	console  []string
	output   lockedBuffer
	stop     func()
	stopOnce sync.Once
}

// startBrowser starts Chromium with a fresh profile; it skips (or, in CI,
// fails) when Chromium is not installed.
func startBrowser(t *testing.T) *headlessBrowser {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		requireTool(t, "headless Chromium is not installed (%v); on Debian: apt-get install chromium, or run .ci/install-browser.sh", err)
	}
	b := &headlessBrowser{dataDir: t.TempDir(), requests: map[network.RequestID]*eventRequest{}}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(b.dataDir),
		chromedp.WindowSize(1024, 768),
		chromedp.CombinedOutput(&b.output),
		// close finds every process of this browser to check it is gone:
		// the zygote's children by the process group, the crash handlers
		// (which start sessions of their own) by this variable, which they
		// inherit. Pdeathsig as chromedp sets it: the browser dies with
		// the test binary.
		chromedp.Env(browserMarkVar+"="+b.dataDir,
			// Crash reports and caches stay in the test's folders too.
			"XDG_CONFIG_HOME="+filepath.Join(b.dataDir, "config"), "XDG_CACHE_HOME="+filepath.Join(b.dataDir, "cache")),
		chromedp.ModifyCmdFunc(func(cmd *exec.Cmd) {
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
			b.cmd = cmd
		}),
	)
	ctx, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithListener(b.listen))
	b.ctx = ctx
	b.stop = func() {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		chromedp.Cancel(cctx) // closes the browser and waits for it
		cancelTab()
		cancelAlloc()
	}
	t.Cleanup(func() { b.close(t) })
	// Start the browser now, so a broken installation shows up here.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("cannot start %s: %v\n%s", chromiumPath, err, b.output.String())
	}
	return b
}

// listen records /api/event requests and console output. It runs in the
// tab's event loop, so it only takes notes.
func (b *headlessBrowser) listen(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		if ev.Request == nil || !strings.HasSuffix(strings.SplitN(ev.Request.URL, "?", 2)[0], "/api/event") || ev.Request.Method != "POST" {
			return
		}
		r := &eventRequest{resourceType: ev.Type}
		for _, e := range ev.Request.PostDataEntries {
			r.raw += string(e.Bytes)
		}
		json.Unmarshal([]byte(r.raw), &r.body)
		b.requests[ev.RequestID] = r
		b.order = append(b.order, r)
	case *network.EventResponseReceived:
		if r := b.requests[ev.RequestID]; r != nil && ev.Response != nil {
			r.status, r.done = ev.Response.Status, true
			for k, v := range ev.Response.Headers {
				if strings.EqualFold(k, "X-Waymark-Dropped") {
					r.dropped = fmt.Sprint(v)
				}
			}
		}
	case *network.EventLoadingFailed:
		if r := b.requests[ev.RequestID]; r != nil {
			r.failed, r.done = ev.ErrorText, true
			if ev.CorsErrorStatus != nil {
				r.failed += " (CORS: " + string(ev.CorsErrorStatus.CorsError) + ")"
			}
		}
	case *runtime.EventConsoleAPICalled:
		var parts []string
		for _, a := range ev.Args {
			if a.Value != nil {
				parts = append(parts, string(a.Value))
			} else {
				parts = append(parts, a.Description)
			}
		}
		b.console = append(b.console, "console."+string(ev.Type)+": "+strings.Join(parts, " "))
	case *runtime.EventExceptionThrown:
		if d := ev.ExceptionDetails; d != nil {
			text := d.Text
			if d.Exception != nil {
				text += " " + d.Exception.Description
			}
			b.console = append(b.console, "exception: "+text)
		}
	}
}

// waitRequests waits until the page has sent n requests to /api/event and
// each has an answer (or failed), and returns them in order. A request
// beyond n fails the test: every tracker request is expected.
func (b *headlessBrowser) waitRequests(t *testing.T, n int) []*eventRequest {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		b.mu.Lock()
		reqs := slices.Clone(b.order)
		done := len(reqs) >= n
		for _, r := range reqs {
			done = done && r.done
		}
		b.mu.Unlock()
		switch {
		case len(reqs) > n:
			t.Fatalf("the page sent %d requests to /api/event; want %d\n%s", len(reqs), n, b.diagnostics())
		case done:
			return reqs
		case time.Now().After(deadline):
			t.Fatalf("waited 15s for %d answered requests to /api/event\n%s", n, b.diagnostics())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hidePage minimises the tab's window. Chromium then marks the page hidden
// and fires visibilitychange, as when a visitor switches tabs or apps.
func (b *headlessBrowser) hidePage(ctx context.Context, t *testing.T) {
	t.Helper()
	targetID := chromedp.FromContext(ctx).Target.TargetID
	w, err := chromedp.CallBrowser(ctx, cdpbrowser.GetWindowForTarget, cdpbrowser.GetWindowForTargetParams{TargetID: targetID})
	if err != nil {
		t.Fatalf("cannot find the tab's window: %v", err)
	}
	_, err = chromedp.CallBrowser(ctx, cdpbrowser.SetWindowBounds, cdpbrowser.SetWindowBoundsParams{
		WindowID: w.WindowID, Bounds: &cdpbrowser.Bounds{WindowState: cdpbrowser.WindowStateMinimized},
	})
	if err != nil {
		t.Fatalf("cannot minimise the tab's window: %v", err)
	}
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.visibilityState === 'hidden'`, chromedp.WithPollingTimeout(10*time.Second)))
	if err != nil {
		state, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("document.visibilityState"))
		t.Fatalf("page not hidden after minimising its window: visibilityState %q: %v", state, err)
	}
}

// sent lists the requests to /api/event and their answers.
func (b *headlessBrowser) sent() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var s strings.Builder
	fmt.Fprintf(&s, "requests to /api/event (%d):\n", len(b.order))
	for i, r := range b.order {
		fmt.Fprintf(&s, "  %d. %s %s -> status %d dropped %q failed %q\n", i, r.resourceType, r.raw, r.status, r.dropped, r.failed)
	}
	return s.String()
}

// diagnostics describes what the browser did, for failure messages.
func (b *headlessBrowser) diagnostics() string {
	var s strings.Builder
	s.WriteString(b.sent())
	b.mu.Lock()
	fmt.Fprintf(&s, "console (%d):\n", len(b.console))
	for _, c := range b.console {
		s.WriteString("  " + c + "\n")
	}
	b.mu.Unlock()
	if out := b.output.String(); out != "" {
		s.WriteString("chromium output (last lines):\n" + lastLines(out, 15) + "\n")
	}
	return s.String()
}

// browserMarkVar marks the environment of a test's browser processes.
const browserMarkVar = "WAYMARK_TEST_BROWSER"

// close stops the browser and checks that none of its processes is left.
func (b *headlessBrowser) close(t *testing.T) {
	t.Helper()
	b.stopOnce.Do(func() {
		pgid := 0
		if b.cmd != nil && b.cmd.Process != nil {
			pgid = b.cmd.Process.Pid
		}
		b.stop()
		var left []int
		deadline := time.Now().Add(10 * time.Second)
		for {
			left = browserProcesses(pgid, browserMarkVar+"="+b.dataDir)
			if len(left) == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if len(left) > 0 {
			for _, pid := range left {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Errorf("chromium processes %v still ran 10s after the browser closed", left)
		}
	})
}

// browserProcesses lists the live processes of the process group pgid or
// with mark in their environment.
func browserProcesses(pgid int, mark string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 3 || f[0] == "Z" {
			continue
		}
		if pgid > 0 && f[2] == strconv.Itoa(pgid) {
			pids = append(pids, pid)
			continue
		}
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if slices.ContainsFunc(bytes.Split(env, []byte{0}), func(v []byte) bool { return string(v) == mark }) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// lockedBuffer collects the browser's stdout and stderr.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
