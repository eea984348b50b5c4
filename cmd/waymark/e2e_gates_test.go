package main

// End-to-end tests of issue 13.2 and 13.4 through the built binary: a
// password-protected link unlocked in a real headless Chromium, and a
// social preview served to crawlers but not to browsers.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// destHost is the destination's host name in the browser test; Chromium
// maps it to 127.0.0.1.
const destHost = "dest.waymark.test"

// destinationServer is the site a link points at, on loopback: it records
// every request it gets.
type destinationServer struct {
	*httptest.Server
	mu   sync.Mutex
	hits []string // "METHOD /path?query"
}

func startDestination(t *testing.T) *destinationServer {
	t.Helper()
	d := &destinationServer{}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/favicon.ico" { // the browser's own, after landing
			d.mu.Lock()
			d.hits = append(d.hits, r.Method+" "+r.URL.RequestURI())
			d.mu.Unlock()
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><html><head><title>Destination reached</title></head><body><p id="dest">welcome</p></body></html>`)
	}))
	t.Cleanup(d.Close)
	return d
}

func (d *destinationServer) requests() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.hits...)
}

// TestE2EPasswordLinkInBrowser opens a password-protected link in headless
// Chromium, submits a wrong password, then the right one, and lands on the
// destination; the stats count exactly one click.
func TestE2EPasswordLinkInBrowser(t *testing.T) {
	n := startTrackedNode(t)
	dest := startDestination(t)
	// The node refuses loopback destinations (they would be itself), so
	// the link names a test host that only the browser maps to loopback:
	// the node never resolves or fetches a destination.
	destURL := "http://" + destHost + ":" + dest.URL[strings.LastIndexByte(dest.URL, ':')+1:]
	r := do(t, "POST", n.base+"/v1/links", n.key, `{"url":"`+destURL+`/secret/page?x=1","password":"correct horse"}`)
	if r.status != 201 {
		t.Fatalf("create: got %d %s; want 201", r.status, r.body)
	}
	created := r.json(t)
	code, _ := created["code"].(string)
	if created["password_protected"] != true || strings.Contains(string(r.body), "correct horse") || strings.Contains(string(r.body), "argon2") {
		t.Fatalf("create answered %s; want password_protected true and neither the password nor its hash", r.body)
	}
	short := n.base + "/" + code

	br := startBrowser(t, chromedp.Flag("host-resolver-rules", "MAP "+destHost+" 127.0.0.1"))
	ctx, cancel := context.WithTimeout(br.ctx, 60*time.Second)
	defer cancel()
	// A browser's user agent: HeadlessChrome's own is (rightly) a bot,
	// and this test counts a person's click.
	if _, err := chromedp.Call(ctx, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{UserAgent: dashHumanUA}); err != nil {
		t.Fatalf("user agent override: %v", err)
	}
	html := func() string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string]("document.documentElement.outerHTML"))
		if err != nil {
			t.Fatalf("read the page: %v\n%s", err, br.diagnostics())
		}
		return s
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(short), chromedp.WaitVisible(chromedp.CSS("#password"))); err != nil {
		t.Fatalf("open %s: %v\n%s", short, err, br.diagnostics())
	}
	if page := html(); strings.Contains(page, destHost) || strings.Contains(page, "secret") {
		t.Fatalf("the form page names the destination:\n%s", page)
	}

	// submit types pw into the form and clicks the button, then waits for
	// the page that answers to satisfy cond (the click starts a
	// navigation, which ends the click's own command early).
	submit := func(pw, cond string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS("#password"), pw)); err != nil {
			t.Fatalf("type the password: %v\n%s", err, br.diagnostics())
		}
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("button[type=submit]"))); err != nil && !strings.Contains(err.Error(), "navigated") {
			t.Fatalf("click submit: %v\n%s", err, br.diagnostics())
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](cond))
			if err == nil && ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("after submitting %q: %s never held (last error %v)\n%s", pw, cond, err, br.diagnostics())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// A wrong password: the form again, with the error, still on the short link.
	submit("wrong horse", `document.querySelector('[role=alert]') !== null`)
	if loc, _ := chromedp.Run(ctx, chromedp.Location()); loc != short {
		t.Fatalf("after a wrong password the browser is at %q; want %q", loc, short)
	}
	if got := dest.requests(); len(got) != 0 {
		t.Fatalf("the destination was reached after a wrong password: %v", got)
	}

	// The right one: the redirect, and the destination.
	submit("correct horse", `document.title === 'Destination reached'`)
	if loc, _ := chromedp.Run(ctx, chromedp.Location()); loc != destURL+"/secret/page?x=1" {
		t.Fatalf("landed at %q; want %q", loc, destURL+"/secret/page?x=1")
	}
	if got := dest.requests(); len(got) != 1 || got[0] != "GET /secret/page?x=1" {
		t.Fatalf("destination requests: got %v; want exactly one GET /secret/page?x=1 (a 303/302 after the POST, no form resent)", got)
	}
	br.close(t)

	// Exactly one click: the form and the wrong attempt counted none.
	statsURL := n.base + "/v1/links/" + code + "/stats"
	clicks := func() (float64, float64) {
		r := do(t, "GET", statsURL, n.key, "")
		if r.status != 200 {
			t.Fatalf("GET stats: %d %s", r.status, r.body)
		}
		totals, _ := r.json(t)["totals"].(map[string]any)
		c, _ := totals["clicks"].(float64)
		b, _ := totals["bot_clicks"].(float64)
		return c, b
	}
	waitFor(t, "the click to reach the stats", 30*time.Second, func() bool { c, b := clicks(); return c+b >= 1 })
	waitFor(t, "node shipped every event it wrote", 20*time.Second, func() bool { return shippedAll(t, n.base) })
	if c, b := clicks(); c != 1 || b != 0 {
		t.Fatalf("stats: clicks %v, bot_clicks %v; want exactly 1 and 0", c, b)
	}
	if v := metric(t, n.base, `waymark_password_attempts_total{result="wrong"}`); v != 1 {
		t.Errorf("waymark_password_attempts_total{result=\"wrong\"}: got %v; want 1", v)
	}
	if v := metric(t, n.base, `waymark_password_attempts_total{result="unlocked"}`); v != 1 {
		t.Errorf("waymark_password_attempts_total{result=\"unlocked\"}: got %v; want 1", v)
	}
}

// TestE2ESocialPreview: a crawler gets the preview page with the escaped
// tags, a browser the 302, and a link without preview gives crawlers the
// 302 too.
func TestE2ESocialPreview(t *testing.T) {
	n := startTrackedNode(t)
	r := do(t, "POST", n.base+"/v1/links", n.key,
		`{"url":"https://example.com/sale?a=1&b=2","preview":{"title":"Sale <50%> & \"more\"","description":"Spring's best","image":"https://img.example/s.png"}}`)
	if r.status != 201 {
		t.Fatalf("create: got %d %s; want 201", r.status, r.body)
	}
	code, _ := r.json(t)["code"].(string)
	r = do(t, "POST", n.base+"/v1/links", n.key, `{"url":"https://example.com/plain"}`)
	if r.status != 201 {
		t.Fatalf("create: got %d %s; want 201", r.status, r.body)
	}
	plain, _ := r.json(t)["code"].(string)

	const slack = "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"
	r = do(t, "GET", n.base+"/"+code, "", "", "User-Agent", slack)
	if r.status != 200 || r.header.Get("Location") != "" {
		t.Fatalf("crawler: got %d Location %q; want 200 and no Location", r.status, r.header.Get("Location"))
	}
	for _, want := range []string{
		`<meta property="og:title" content="Sale &lt;50%&gt; &amp; &#34;more&#34;">`,
		`<meta property="og:description" content="Spring&#39;s best">`,
		`<meta property="og:image" content="https://img.example/s.png">`,
		`<meta name="twitter:card" content="summary_large_image">`,
		`<meta http-equiv="refresh" content="0; url=https://example.com/sale?a=1&amp;b=2">`,
	} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("crawler page lacks %s\n%s", want, r.body)
		}
	}
	r = do(t, "GET", n.base+"/"+code, "", "", "User-Agent", dashHumanUA)
	if r.status != 302 || r.header.Get("Location") != "https://example.com/sale?a=1&b=2" {
		t.Errorf("browser: got %d Location %q; want 302 to the destination", r.status, r.header.Get("Location"))
	}
	r = do(t, "GET", n.base+"/"+plain, "", "", "User-Agent", slack)
	if r.status != 302 || r.header.Get("Location") != "https://example.com/plain" {
		t.Errorf("crawler on a link without preview: got %d Location %q; want 302", r.status, r.header.Get("Location"))
	}

	// Preview fetches count as clicks the analytics mark bot, as every
	// crawler's redirect does: two more unfurlers, so 3 bot clicks and the
	// browser's 1.
	for _, ua := range []string{"facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)", "WhatsApp/2.23.20.0 A"} {
		if r := do(t, "GET", n.base+"/"+code, "", "", "User-Agent", ua); r.status != 200 {
			t.Fatalf("%s: got %d; want 200", ua, r.status)
		}
	}
	statsURL := n.base + "/v1/links/" + code + "/stats"
	var clicks, bots float64
	waitFor(t, "the clicks to reach the stats", 30*time.Second, func() bool {
		r := do(t, "GET", statsURL, n.key, "")
		totals, _ := r.json(t)["totals"].(map[string]any)
		clicks, _ = totals["clicks"].(float64)
		bots, _ = totals["bot_clicks"].(float64)
		return clicks+bots >= 4
	})
	waitFor(t, "node shipped every event it wrote", 20*time.Second, func() bool { return shippedAll(t, n.base) })
	r = do(t, "GET", statsURL, n.key, "")
	totals, _ := r.json(t)["totals"].(map[string]any)
	if totals["clicks"] != 1.0 || totals["bot_clicks"] != 3.0 {
		t.Errorf("stats: clicks %v, bot_clicks %v; want 1 (the browser) and 3 (the unfurlers)", totals["clicks"], totals["bot_clicks"])
	}
}
