package main

// Browser end-to-end tests (issue 4): a real headless Chromium, Debian's
// chromium package driven by chromedp, loads pages from the test's own web
// site on 127.0.0.1:0 (another origin than the Waymark node, as a customer's
// site would be) and the trackers on those pages post to a real
// `waymark node --dev`. The node has every role, so it ships its segments
// to itself and `waymark events count|tail` read its raw store. This file
// holds the harness (browser, node, site server) and the test of
// Plausible's own trackers; the tests of Waymark's tracker are in
// e2e_browser_tracker_test.go and e2e_browser_prerender_test.go.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/preload"
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
// (WAYMARK_CI set, or CI=true), where a missing tool is a broken setup
// and fails the test.
func requireTool(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	// .ci/run sets WAYMARK_CI=1 and installs every tool, so there a
	// missing one is a broken CI, not a reason to skip (internal/chserver
	// applies the same rule).
	if os.Getenv("WAYMARK_CI") != "" || os.Getenv("CI") == "true" {
		t.Fatalf("%s (WAYMARK_CI or CI=true: failing instead of skipping)", msg)
	}
	t.Skip(msg)
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
	for _, pg := range []string{"/plausible-legacy.html", "/plausible.html"} {
		err := chromedp.Do(ctx, chromedp.Navigate(site.URL+pg),
			chromedp.WaitVisible(chromedp.CSS("#status")),
			void(chromedp.Poll[bool](`document.getElementById('status').textContent === 'tracking'`, chromedp.WithPollingTimeout(10*time.Second))),
		)
		if err != nil {
			t.Fatalf("load %s: %v\n%s", pg, err, br.diagnostics())
		}
		sent++
		br.waitRequests(t, sent) // the pageview
		if err := chromedp.Do(ctx, evaluate("signup()", chromedp.EvalAwaitPromise)); err != nil {
			t.Fatalf("custom event on %s: %v\n%s", pg, err, br.diagnostics())
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
		"pageview /plausible-legacy.html":      1,
		"custom signup /plausible-legacy.html": 1,
		"pageview /plausible.html":             1,
		"custom signup /plausible.html":        1,
		"engagement /plausible.html":           1,
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
// path" keys ("custom name path" for custom events) with their counts.
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
		key := ev.Kind + " " + ev.Path
		if ev.Kind == "custom" {
			key = "custom " + ev.Name + " " + ev.Path
		}
		got[key]++
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

// siteServer is the customer's web site: the pages of testdata/browser
// with their placeholders filled in, /vendor/ from the npm folder, /files/
// as downloads, and spa.html for every other path (client-side routing).
// It notes every request it answers. For the prerender test it also
// answers /ran, /status (whether /ran said the tracker ran while
// prerendering) and /report.
type siteServer struct {
	*httptest.Server
	mu   sync.Mutex
	hits []siteHit
}

// siteHit is one request to the site server.
type siteHit struct {
	path, query string
	purpose     string // Sec-Purpose: "prefetch;prerender" for a prerender
	body        string
}

// siteConfig is what the site's pages are filled in with.
type siteConfig struct {
	waymark  string // __WAYMARK_ORIGIN__: the Waymark node
	domain   string // __SITE_DOMAIN__: the site's domain, as registered
	vendor   string // npm folder served under /vendor/, or ""
	external string // __EXTERNAL_ORIGIN__: another web site, for outbound links
}

func startSiteServer(t *testing.T, waymarkOrigin, domain, vendorDir string) *siteServer {
	return startSite(t, siteConfig{waymark: waymarkOrigin, domain: domain, vendor: vendorDir})
}

// fillPage reads a page of testdata/browser and fills in its placeholders;
// __SITE_ORIGIN__ is the origin the page is served from.
func fillPage(name string, c siteConfig, siteOrigin string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join("testdata", "browser", name))
	if err != nil {
		return nil, err
	}
	return []byte(strings.NewReplacer("__WAYMARK_ORIGIN__", c.waymark, "__SITE_DOMAIN__", c.domain,
		"__EXTERNAL_ORIGIN__", c.external, "__SITE_ORIGIN__", siteOrigin).Replace(string(b))), nil
}

func startSite(t *testing.T, c siteConfig) *siteServer {
	t.Helper()
	s := &siteServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		s.mu.Lock()
		s.hits = append(s.hits, siteHit{path: r.URL.Path, query: r.URL.RawQuery, purpose: r.Header.Get("Sec-Purpose"), body: string(body)})
		s.mu.Unlock()
		// no-cache, not no-store: a page answered with no-store may not
		// enter the back/forward cache.
		w.Header().Set("Cache-Control", "no-cache")
		if rest, ok := strings.CutPrefix(r.URL.Path, "/vendor/"); ok {
			if c.vendor == "" {
				http.NotFound(w, r)
				return
			}
			file := filepath.Join(c.vendor, filepath.FromSlash(path.Clean("/"+rest)))
			if _, err := os.Stat(file); err != nil && path.Ext(rest) == "" {
				file += ".js" // an ES import without extension, as bundlers resolve it
			}
			http.ServeFile(w, r, file)
			return
		}
		name := strings.TrimPrefix(r.URL.Path, "/")
		switch {
		case strings.HasPrefix(r.URL.Path, "/files/"):
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Disposition", "attachment")
			io.WriteString(w, "a file the visitor downloads\n")
			return
		case r.URL.Path == "/ran" || r.URL.Path == "/report":
			w.WriteHeader(http.StatusNoContent)
			return
		case r.URL.Path == "/status":
			if s.ranPrerendering() {
				io.WriteString(w, "ran")
			}
			return
		case strings.HasSuffix(name, ".js") && !strings.Contains(name, "/"):
			w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		case strings.HasSuffix(name, ".html") && !strings.Contains(name, "/"):
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
		default:
			name = "spa.html"
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
		}
		page, err := fillPage(name, c, "http://"+r.Host)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Write(page)
	}))
	t.Cleanup(s.Close)
	return s
}

// ranPrerendering reports whether a prerendered page has said (on /ran)
// that its tracker started while it was still prerendering.
func (s *siteServer) ranPrerendering() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.hits {
		if h.path == "/ran" && strings.Contains(h.query, "prerendering=true") {
			return true
		}
	}
	return false
}

// waitHit waits until the site has answered a request for path and
// returns the first such request.
func (s *siteServer) waitHit(t *testing.T, path string, diag func() string) siteHit {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if h, ok := s.hit(path); ok {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 15s for the site to be asked for %s\nsite requests: %v\n%s", path, s.requests(), diag())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *siteServer) hit(path string) (siteHit, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.hits {
		if h.path == path {
			return h, true
		}
	}
	return siteHit{}, false
}

func (s *siteServer) requests() []siteHit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.hits)
}

// eventBody is what the tests read of an /api/event body.
type eventBody struct {
	Name  string            `json:"n"`
	URL   string            `json:"u"`
	E     *float64          `json:"e"`
	SD    *float64          `json:"sd"`
	H     *float64          `json:"h"`
	Props map[string]string `json:"p"`
}

// eventRequest is one request to /api/event as the browser saw it.
type eventRequest struct {
	resourceType network.ResourceType
	raw          string
	body         eventBody
	status       int64
	dropped      string // X-Waymark-Dropped
	failed       string // network error, CORS or the like
	done         bool
}

// path is the path of the page the event names, as the tracker sent it.
func (r *eventRequest) path() string { return r.body.path() }

// path is the path of the event's URL, without query and fragment.
func (b *eventBody) path() string {
	u := b.URL
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
// extra options go after the harness's own (e2e_gates_test.go maps a
// test host name to loopback with them).
func startBrowser(t *testing.T, extra ...chromedp.ExecAllocatorOption) *headlessBrowser {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		requireTool(t, "headless Chromium is not installed (%v); on Debian: apt-get install chromium, or run .ci/install-browser.sh", err)
	}
	b := &headlessBrowser{dataDir: t.TempDir(), requests: map[network.RequestID]*eventRequest{}}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append([]chromedp.ExecAllocatorOption{
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
	}, extra...)...)
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
	case *preload.EventPrerenderStatusUpdated:
		b.console = append(b.console, fmt.Sprintf("prerender %s: %s %s %s", ev.Key.URL, ev.Status, ev.PrerenderStatus, ev.DisallowedMojoInterface))
	case *page.EventBackForwardCacheNotUsed:
		var why []string
		for _, r := range ev.NotRestoredExplanations {
			why = append(why, string(r.Reason))
		}
		b.console = append(b.console, "back/forward cache not used: "+strings.Join(why, ", "))
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

// allowAutomation sets window.__waymark = true in every document the tab
// opens from now on, before its scripts run. It is the tracker's opt-in
// for automated browsers (Plausible's is window.__plausible): Chromium
// under chromedp has navigator.webdriver = true, which the tracker
// otherwise ignores.
func (b *headlessBrowser) allowAutomation(t *testing.T) {
	t.Helper()
	_, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: "window.__waymark = true;"})
	if err != nil {
		t.Fatalf("cannot add the automation opt-in to new documents: %v", err)
	}
}

// pageSend is one request to /api/event as testdata/browser/capture.js
// recorded it inside the page.
type pageSend struct {
	Via          string    `json:"via"`
	Body         eventBody `json:"body"`
	At           float64   `json:"at"` // Date.now() when the tracker sent it
	Path         string    `json:"path"`
	Prerendering bool      `json:"prerendering"`
	Visibility   string    `json:"visibility"`
}

// pageSent reads what capture.js recorded in the current document.
func pageSent(ctx context.Context, t *testing.T, diag func() string) []pageSend {
	t.Helper()
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]pageSend]("window.__sent || []"))
	if err != nil {
		t.Fatalf("cannot read window.__sent: %v\n%s", err, diag())
	}
	return got
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
	// Polled from here, not with chromedp.Poll: a page restored from the
	// back/forward cache has an execution context chromedp does not track.
	deadline := time.Now().Add(10 * time.Second)
	for {
		state, err := chromedp.Run(ctx, chromedp.Evaluate[string]("document.visibilityState"))
		if err == nil && state == "hidden" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("page not hidden 10s after minimising its window: visibilityState %q (%v)", state, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// requestCount is how many requests to /api/event the browser has sent.
func (b *headlessBrowser) requestCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.order)
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
