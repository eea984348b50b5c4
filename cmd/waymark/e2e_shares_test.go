package main

// Shared dashboards and stats exports (issue 13 points 6 and 7), end to
// end: real `waymark` processes, real headless Chromium for the pages,
// numbers worked out by hand from the events each test sends.

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
)

// shareEvents sends the site's hand-counted scenario, all now, one client
// address per visitor:
//
//	V1 /         (from www.google.com)   then /pricing
//	V2 /blog?utm_source=newsletter&utm_medium=email
//	V3 /
//
// Visitors 3, visits 3, pageviews 4, views per visit 4/3 = 1.33, bounce
// rate 2 of 3 visits (V2, V3) = 67 %.
func shareEvents(t *testing.T, base, domain, prefix string) {
	t.Helper()
	pv := func(ip, path, ref string) {
		t.Helper()
		body := fmt.Sprintf(`{"n":"pageview","u":"https://%s%s","d":%q,"r":%q}`, domain, path, domain, ref)
		r := do(t, "POST", base+"/api/event", "", body, "Content-Type", "text/plain", "Origin", "https://"+domain,
			"User-Agent", dashHumanUA, "X-Forwarded-For", ip)
		if r.status != 202 || r.header.Get("X-Waymark-Dropped") != "" {
			t.Fatalf("event %s: got %d dropped %q: %s", body, r.status, r.header.Get("X-Waymark-Dropped"), r.body)
		}
	}
	pv(prefix+".1", "/", "https://www.google.com/search?q=x")
	pv(prefix+".1", "/pricing", "")
	pv(prefix+".2", "/blog?utm_source=newsletter&utm_medium=email", "")
	pv(prefix+".3", "/", "")
}

// shareClicks makes 3 clicks on code from 2 addresses: clicks 3, unique
// visitors 2.
func shareClicks(t *testing.T, base, code, prefix string) {
	t.Helper()
	for i, ip := range []string{prefix + ".1", prefix + ".2", prefix + ".1"} {
		if r := do(t, "GET", base+"/"+code, "", "", "User-Agent", dashHumanUA, "X-Forwarded-For", ip); r.status != 302 {
			t.Fatalf("click %d: got %d; want 302", i, r.status)
		}
	}
}

func waitSiteVisitors(t *testing.T, base, key, site string, want float64) {
	t.Helper()
	waitFor(t, "the site's events in the stats", 30*time.Second, func() bool {
		r := do(t, "GET", base+"/v1/sites/"+site+"/stats/aggregate", key, "")
		return r.status == 200 && r.json(t)["pageviews"] == want
	})
}

func waitLinkClicks(t *testing.T, base, key, code string, want float64) {
	t.Helper()
	waitFor(t, "the link's clicks in the stats", 30*time.Second, func() bool {
		r := do(t, "GET", base+"/v1/links/"+code+"/stats", key, "")
		if r.status != 200 {
			return false
		}
		totals, _ := r.json(t)["totals"].(map[string]any)
		return totals["clicks"] == want
	})
}

func createShare(t *testing.T, base, key, path, body string) (shareURL, id string) {
	t.Helper()
	r := do(t, "POST", base+path+"/shares", key, body)
	if r.status != 201 {
		t.Fatalf("POST %s/shares: got %d %s; want 201", path, r.status, r.body)
	}
	m := r.json(t)
	shareURL, _ = m["url"].(string)
	id, _ = m["id"].(string)
	if !strings.HasPrefix(shareURL, base+"/share/") || len(id) != 16 {
		t.Fatalf("share answer %s: want a url under %s/share/ and an id", r.body, base)
	}
	return shareURL, id
}

// openShare loads a share URL in a new tab and waits for its report.
func openShare(t *testing.T, br *headlessBrowser, u, source string) (*dashPage, dashView) {
	t.Helper()
	ctx, cancel := context.WithTimeout(br.ctx, 45*time.Second)
	t.Cleanup(cancel)
	p := &dashPage{t: t, br: br, ctx: ctx}
	p.do("load the shared dashboard", chromedp.Navigate(u+"#range=today"))
	return p, p.waitReady(source)
}

func TestE2EShareDashboard(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		requireTool(t, "headless Chromium is not installed (%v); on Debian: apt-get install chromium", err)
	}
	n := startTrackedNode(t)
	site := n.createSite(t, "share.example")
	other := n.createSite(t, "other.example")
	r := do(t, "POST", n.base+"/v1/links", n.key, `{"url":"https://example.com/shared-link"}`)
	if r.status != 201 {
		t.Fatalf("create link: %d %s", r.status, r.body)
	}
	code := r.json(t)["code"].(string)
	shareEvents(t, n.base, "share.example", "10.7.0")
	shareClicks(t, n.base, code, "10.7.1")
	waitSiteVisitors(t, n.base, n.key, site, 4)
	waitLinkClicks(t, n.base, n.key, code, 3)

	siteShare, siteShareID := createShare(t, n.base, n.key, "/v1/sites/"+site, `{"name":"Press kit"}`)
	br := startBrowser(t)
	p, v := openShare(t, br, siteShare, "/v1/sites/"+site+"/stats/aggregate")
	if v.State != "ready" {
		t.Fatalf("the shared dashboard did not load: state %q banner %q\n%s", v.State, v.Banner, br.diagnostics())
	}
	for k, want := range map[string]string{"visitors": "3", "visits": "3", "pageviews": "4", "views_per_visit": "1.33", "bounce_rate": "67"} {
		if v.Totals[k] != want {
			t.Errorf("shared site dashboard: %s shows %q; want %s (by hand)", k, v.Totals[k], want)
		}
	}
	if v.Title != site {
		t.Errorf("subject %q; want the site id %s", v.Title, site)
	}
	keyForm, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](`!document.querySelector('#connect').hidden || !document.querySelector('#kind').hidden`))
	if err != nil || keyForm {
		t.Errorf("the shared dashboard shows the key form or the link/site picker (%v)", err)
	}
	// The page's Export button saves the range's zip through the share.
	downloads := t.TempDir()
	if _, err := chromedp.CallBrowser(p.ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
		Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: downloads}); err != nil {
		t.Fatalf("allow downloads: %v", err)
	}
	p.do("click Export", chromedp.Click(chromedp.CSS("#export")))
	var saved []byte
	waitFor(t, "the exported zip in the download folder", 20*time.Second, func() bool {
		entries, _ := os.ReadDir(downloads)
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".zip") && strings.Contains(e.Name(), "share.example") {
				saved, _ = os.ReadFile(filepath.Join(downloads, e.Name()))
				return len(saved) > 0
			}
		}
		return false
	})
	// "Today" is read by the hour: the hours add up to the day's numbers.
	var pageviews, visitorRows int
	for _, row := range readZip(t, saved)["visitors.csv"][1:] {
		var pv int
		fmt.Sscan(row[2], &pv)
		pageviews += pv
		visitorRows++
	}
	if pageviews != 4 || visitorRows == 0 {
		t.Errorf("the downloaded visitors.csv: %d hours adding up to %d pageviews; want 4 (by hand)", visitorRows, pageviews)
	}
	p.noExceptions()

	if r := do(t, "GET", siteShare+"/", "", ""); r.status != 308 || !strings.HasSuffix(r.header.Get("Location"), strings.TrimPrefix(siteShare, n.base)) {
		t.Errorf("GET the share with a trailing slash: %d Location %q; want 308 to the share", r.status, r.header.Get("Location"))
	}
	// The token opens that one site's stats and nothing else.
	tok := strings.TrimPrefix(siteShare, n.base+"/share/")
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/v1/sites/" + other + "/stats/aggregate", 404},
		{"GET", "/v1/sites/" + other + "/stats/export", 404},
		{"GET", "/v1/links/" + code + "/stats", 404},
		{"GET", "/v1/links", 404},
		{"GET", "/v1/sites/" + site, 404},
		{"GET", "/v1/sites/" + site + "/shares", 404},
		{"GET", "/api/v2/query", 404},
		{"GET", "/v1/sites/" + site + "/stats/aggregate/../../" + other + "/stats/aggregate", 404},
		{"POST", "/v1/sites/" + site + "/stats/aggregate", 403},
		{"DELETE", "/v1/sites/" + site + "/shares/" + siteShareID, 403},
	} {
		if r := do(t, c.method, siteShare+c.path, "", ""); r.status != c.status {
			t.Errorf("%s %s through the share: got %d %s; want %d", c.method, c.path, r.status, r.body, c.status)
		}
	}
	// The token is no API key.
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/sites/" + site + "/stats/aggregate"},
		{"GET", "/v1/links"},
		{"DELETE", "/v1/sites/" + site + "/shares/" + siteShareID},
		{"POST", "/v1/links"},
	} {
		if r := do(t, c.method, n.base+c.path, tok, `{"url":"https://example.com/x"}`); r.status != 401 {
			t.Errorf("%s %s with the share token as a key: got %d; want 401", c.method, c.path, r.status)
		}
	}
	// A link share shows the link's hand-counted clicks.
	linkShare, _ := createShare(t, n.base, n.key, "/v1/links/"+code, ``)
	_, lv := openShare(t, br, linkShare, "/v1/links/"+code+"/stats")
	if lv.State != "ready" || lv.Totals["clicks"] != "3" || lv.Totals["unique_visitors"] != "2" {
		t.Errorf("shared link dashboard: state %q totals %v; want clicks 3, unique visitors 2 (by hand)", lv.State, lv.Totals)
	}
	if r := do(t, "GET", linkShare+"/v1/sites/"+site+"/stats/aggregate", "", ""); r.status != 404 {
		t.Errorf("a link share reading a site: got %d; want 404", r.status)
	}
	// A deleted link's share opens nothing (the owner took the link away).
	if r := do(t, "DELETE", n.base+"/v1/links/"+code, n.key, ""); r.status != 204 && r.status != 200 {
		t.Fatalf("delete link: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", linkShare+"/v1/links/"+code+"/stats", "", ""); r.status != 404 {
		t.Errorf("the share of a deleted link: got %d; want 404", r.status)
	}

	// Revoked: 404 everywhere, and the open tab's next read fails.
	if r := do(t, "DELETE", n.base+"/v1/sites/"+site+"/shares/"+siteShareID, n.key, ""); r.status != 204 {
		t.Fatalf("revoke: got %d %s; want 204", r.status, r.body)
	}
	for _, path := range []string{"", "/about", "/v1/sites/" + site + "/stats/aggregate", "/v1/sites/" + site + "/stats/export"} {
		if r := do(t, "GET", siteShare+path, "", ""); r.status != 404 {
			t.Errorf("GET %s after revocation: got %d; want 404", path, r.status)
		}
	}
	if l := do(t, "GET", n.base+"/v1/sites/"+site+"/shares", n.key, ""); strings.Contains(string(l.body), siteShareID) {
		t.Errorf("the revoked share is still listed: %s", l.body)
	}
	p.do("reload the revoked share", chromedp.Navigate(siteShare))
	title, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.querySelector('h1') ? document.querySelector('h1').textContent : document.title`))
	if err != nil || title != "Dashboard not found" {
		t.Errorf("the revoked share's page: %q (%v); want the not-found page", title, err)
	}
	t.Logf("shared dashboard totals %v; revoked page %q", v.Totals, title)
	br.close(t)
}

func TestE2ESharePasswordBrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		requireTool(t, "headless Chromium is not installed (%v); on Debian: apt-get install chromium", err)
	}
	n := startTrackedNode(t)
	r := do(t, "POST", n.base+"/v1/links", n.key, `{"url":"https://example.com/locked-share"}`)
	if r.status != 201 {
		t.Fatalf("create link: %d %s", r.status, r.body)
	}
	code := r.json(t)["code"].(string)
	shareClicks(t, n.base, code, "10.6.1")
	waitLinkClicks(t, n.base, n.key, code, 3)
	const password = "correct horse battery"
	shareURL, _ := createShare(t, n.base, n.key, "/v1/links/"+code, `{"name":"Campaign","password":"`+password+`"}`)
	list := do(t, "GET", n.base+"/v1/links/"+code+"/shares", n.key, "")
	if list.status != 200 || strings.Contains(string(list.body), password) || !strings.Contains(string(list.body), `"password_protected":true`) {
		t.Fatalf("share list: %d %s; want the share as password_protected and no password", list.status, list.body)
	}
	if r := do(t, "GET", shareURL+"/v1/links/"+code+"/stats", "", ""); r.status != 401 {
		t.Fatalf("stats of a locked share without the cookie: got %d; want 401", r.status)
	}

	br := startBrowser(t)
	ctx, cancel := context.WithTimeout(br.ctx, 60*time.Second)
	defer cancel()
	p := &dashPage{t: t, br: br, ctx: ctx}
	submit := func(pw string) {
		p.do("submit the password "+pw,
			chromedp.WaitVisible(chromedp.CSS("#password")),
			evaluate(`document.querySelector('#password').value = ''`),
			chromedp.SendKeys(chromedp.CSS("#password"), pw),
			chromedp.Submit(chromedp.CSS("#password")),
		)
	}
	// settle polls cond across the navigation a form post makes (a poll
	// inside the page ends with the page).
	settle := func(what, cond string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			ok, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](cond))
			if err == nil && ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: %v\n%s", what, err, br.diagnostics())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	p.do("load the locked share", chromedp.Navigate(shareURL+"#range=today"), chromedp.WaitVisible(chromedp.CSS("#password")))
	submit("wrong password")
	settle("the wrong-password message", `(document.querySelector('#share-error')?.textContent || '').includes('Incorrect password')`)
	submit(password)
	settle("the dashboard after the right password", `!!document.querySelector('#totals')`)
	v := p.waitReady("/v1/links/" + code + "/stats")
	if v.State != "ready" || v.Totals["clicks"] != "3" || v.Totals["unique_visitors"] != "2" {
		t.Fatalf("after the right password: state %q totals %v banner %q; want clicks 3, unique visitors 2 (by hand)\n%s",
			v.State, v.Totals, v.Banner, br.diagnostics())
	}
	p.noExceptions()
	br.close(t)

	// The cookie opens this share only: under another share's name, even
	// one with the same password on the same link, it is refused.
	form := "application/x-www-form-urlencoded"
	ok := do(t, "POST", shareURL, "", "password="+url.QueryEscape(password), "Content-Type", form)
	if ok.status != 303 || ok.header.Get("Set-Cookie") == "" {
		t.Fatalf("right password: got %d %v; want 303 with a cookie", ok.status, ok.header)
	}
	cookie := strings.SplitN(ok.header.Get("Set-Cookie"), ";", 2)[0]
	if !strings.Contains(ok.header.Get("Set-Cookie"), "HttpOnly") || !strings.Contains(ok.header.Get("Set-Cookie"), "Path=/share/") &&
		!strings.Contains(ok.header.Get("Set-Cookie"), "path=/share/") {
		t.Errorf("cookie %q: want HttpOnly and a path under /share/", ok.header.Get("Set-Cookie"))
	}
	if r := do(t, "GET", shareURL+"/about", "", "", "Cookie", cookie); r.status != 200 {
		t.Fatalf("about with the cookie: got %d %s", r.status, r.body)
	}
	second, secondID := createShare(t, n.base, n.key, "/v1/links/"+code, `{"password":"`+password+`"}`)
	_, value, _ := strings.Cut(cookie, "=")
	if r := do(t, "GET", second+"/about", "", "", "Cookie", "wm_share_"+secondID+"="+value); r.status != 401 {
		t.Errorf("another share with the first share's cookie: got %d; want 401", r.status)
	}
	// Guessing is rate-limited per client: at most the burst of 10, minus
	// the attempts above, before 429 with Retry-After.
	limited := false
	for i := 0; i < 12 && !limited; i++ {
		r := do(t, "POST", second, "", "password=guess"+fmt.Sprint(i), "Content-Type", form)
		switch r.status {
		case 401:
		case 429:
			limited = r.header.Get("Retry-After") != ""
		default:
			t.Fatalf("guess %d: got %d; want 401 or 429", i, r.status)
		}
	}
	if !limited {
		t.Error("12 wrong guesses from one address were never refused with 429 and Retry-After")
	}
	// Behind a trusted proxy (--dev trusts loopback) each forwarded client
	// has its own allowance: another address still gets its guess checked.
	if r := do(t, "POST", second, "", "password=guess", "Content-Type", form, "X-Forwarded-For", "203.0.113.9"); r.status != 401 {
		t.Errorf("a guess from another client behind the proxy: got %d; want 401", r.status)
	}
}

// readZip opens a zip answer and returns each file's CSV rows.
func readZip(t *testing.T, body []byte) map[string][][]string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
	if err != nil {
		t.Fatalf("the export is not a zip: %v (%d bytes)", err, len(body))
	}
	out := map[string][][]string{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		if !bytes.HasSuffix(raw, []byte("\r\n")) {
			t.Errorf("%s does not end its lines with CRLF (RFC 4180)", f.Name)
		}
		rows, err := csv.NewReader(bytes.NewReader(raw)).ReadAll()
		if err != nil {
			t.Fatalf("%s is not CSV: %v", f.Name, err)
		}
		out[f.Name] = rows
	}
	return out
}

// csvRow finds the row whose first column is name.
func csvRow(rows [][]string, name string) []string {
	for _, r := range rows[1:] {
		if len(r) > 0 && r[0] == name {
			return r
		}
	}
	return nil
}

func checkCSV(t *testing.T, files map[string][][]string, file, header string, want map[string]string) {
	t.Helper()
	rows, ok := files[file]
	if !ok {
		t.Errorf("the export has no %s", file)
		return
	}
	if got := strings.Join(rows[0], ","); got != header {
		t.Errorf("%s header %q; want Plausible's %q", file, got, header)
	}
	for name, w := range want {
		if got := strings.Join(csvRow(rows, name), ","); got != w {
			t.Errorf("%s row %q: got %q; want %q (by hand)", file, name, got, w)
		}
	}
}

func TestE2EStatsExport(t *testing.T) {
	n := startTrackedNode(t)
	site := n.createSite(t, "export.example")
	r := do(t, "POST", n.base+"/v1/links", n.key, `{"url":"https://example.com/export-link"}`)
	if r.status != 201 {
		t.Fatalf("create link: %d %s", r.status, r.body)
	}
	code := r.json(t)["code"].(string)
	waitFor(t, "not within 10 s of midnight UTC", 30*time.Second, func() bool {
		now := time.Now().UTC()
		return now.Truncate(24*time.Hour).Add(24*time.Hour).Sub(now) > 10*time.Second
	})
	today := time.Now().UTC().Format(time.DateOnly)
	shareEvents(t, n.base, "export.example", "10.5.0")
	shareClicks(t, n.base, code, "10.5.1")
	waitSiteVisitors(t, n.base, n.key, site, 4)
	waitLinkClicks(t, n.base, n.key, code, 3)

	ex := do(t, "GET", n.base+"/v1/sites/"+site+"/stats/export?from="+today+"&to="+today, n.key, "")
	if ex.status != 200 || ex.header.Get("Content-Type") != "application/zip" {
		t.Fatalf("site export: %d %s %s", ex.status, ex.header.Get("Content-Type"), ex.body)
	}
	if ex.header.Get("Content-Length") != "" {
		t.Errorf("the export has a Content-Length (%s): it was buffered whole, not streamed", ex.header.Get("Content-Length"))
	}
	if cd := ex.header.Get("Content-Disposition"); !strings.Contains(cd, "export.example "+today+" to "+today+".zip") {
		t.Errorf("Content-Disposition %q; want the domain and the range in the file name", cd)
	}
	files := readZip(t, ex.body)
	for _, f := range []string{"visitors.csv", "sources.csv", "channels.csv", "utm_mediums.csv", "utm_sources.csv", "utm_campaigns.csv",
		"utm_contents.csv", "utm_terms.csv", "referrers.csv", "pages.csv", "entry_pages.csv", "exit_pages.csv", "countries.csv",
		"regions.csv", "cities.csv", "browsers.csv", "operating_systems.csv", "devices.csv"} {
		if _, ok := files[f]; !ok {
			t.Errorf("the site export has no %s", f)
		}
	}
	checkCSV(t, files, "visitors.csv", "date,visitors,pageviews,visits,views_per_visit,bounce_rate,visit_duration", nil)
	if rows := files["visitors.csv"]; len(rows) != 2 || strings.Join(rows[1][:6], ",") != today+",3,4,3,1.33,67" {
		t.Errorf("visitors.csv: %v; want one row %s,3,4,3,1.33,67,... (by hand)", rows, today)
	}
	checkCSV(t, files, "pages.csv", "name,visitors,pageviews,bounce_rate,time_on_page,scroll_depth", nil)
	for page, want := range map[string]string{"/": "2,2", "/pricing": "1,1", "/blog": "1,1"} {
		if row := csvRow(files["pages.csv"], page); len(row) < 3 || strings.Join(row[1:3], ",") != want {
			t.Errorf("pages.csv %s: %v; want visitors,pageviews %s (by hand)", page, row, want)
		}
	}
	checkCSV(t, files, "entry_pages.csv", "name,unique_entrances,total_entrances,visit_duration", nil)
	for page, want := range map[string]string{"/": "2,2", "/blog": "1,1"} {
		if row := csvRow(files["entry_pages.csv"], page); len(row) < 3 || strings.Join(row[1:3], ",") != want {
			t.Errorf("entry_pages.csv %s: %v; want %s (by hand)", page, row, want)
		}
	}
	// exit_rate = floor(exits / the page's pageviews * 100): / 1 of 2.
	// unique_exits counts a visitor once its visit has ended (rollup:
	// closeRun), 30 minutes on, so it is not checked here.
	checkCSV(t, files, "exit_pages.csv", "name,unique_exits,total_exits,exit_rate", nil)
	for page, want := range map[string]string{"/": "1,50", "/pricing": "1,100", "/blog": "1,100"} {
		if row := csvRow(files["exit_pages.csv"], page); len(row) < 4 || strings.Join(row[2:4], ",") != want {
			t.Errorf("exit_pages.csv %s: %v; want total_exits,exit_rate %s (by hand)", page, row, want)
		}
	}
	checkCSV(t, files, "sources.csv", "name,visitors,bounce_rate,visit_duration", nil)
	if row := csvRow(files["sources.csv"], "Google"); len(row) < 2 || row[1] != "1" {
		t.Errorf("sources.csv Google: %v; want 1 visitor (V1)", row)
	}
	checkCSV(t, files, "utm_sources.csv", "name,visitors,bounce_rate,visit_duration", nil)
	if row := csvRow(files["utm_sources.csv"], "newsletter"); len(row) < 3 || row[1] != "1" || row[2] != "100" {
		t.Errorf("utm_sources.csv newsletter: %v; want 1 visitor, bounce rate 100 (V2)", row)
	}
	if row := csvRow(files["utm_mediums.csv"], "email"); len(row) < 2 || row[1] != "1" {
		t.Errorf("utm_mediums.csv email: %v; want 1 visitor", row)
	}
	checkCSV(t, files, "devices.csv", "name,visitors", nil)
	sum := 0
	for _, row := range files["devices.csv"][1:] {
		var v int
		fmt.Sscan(row[1], &v)
		sum += v
	}
	if sum != 3 {
		t.Errorf("devices.csv: visitors add up to %d; want 3: %v", sum, files["devices.csv"])
	}

	// The link: a zip of its daily clicks and its breakdowns.
	lx := do(t, "GET", n.base+"/v1/links/"+code+"/stats/export?from="+today+"&to="+today, n.key, "")
	if lx.status != 200 {
		t.Fatalf("link export: %d %s", lx.status, lx.body)
	}
	lfiles := readZip(t, lx.body)
	checkCSV(t, lfiles, "clicks.csv", "date,clicks,unique_visitors", map[string]string{today: today + ",3,2"})
	for _, f := range []string{"countries.csv", "devices.csv", "browsers.csv", "operating_systems.csv", "referrers.csv", "utm_sources.csv", "utm_mediums.csv", "utm_campaigns.csv"} {
		rows, ok := lfiles[f]
		if !ok {
			t.Errorf("the link export has no %s", f)
			continue
		}
		clicks := 0
		for _, row := range rows[1:] {
			var c int
			fmt.Sscan(row[1], &c)
			clicks += c
		}
		if strings.Join(rows[0], ",") != "name,clicks,unique_visitors" || clicks != 3 {
			t.Errorf("link %s: header %v, clicks adding up to %d; want name,clicks,unique_visitors and 3", f, rows[0], clicks)
		}
	}

	// Through a share: the same tables (the export is a stats read a
	// share allows, as Plausible's shared links can export).
	shareURL, _ := createShare(t, n.base, n.key, "/v1/sites/"+site, ``)
	sx := do(t, "GET", shareURL+"/v1/sites/"+site+"/stats/export?from="+today+"&to="+today, "", "")
	if sx.status != 200 {
		t.Fatalf("export through the share: %d %s", sx.status, sx.body)
	}
	shared := readZip(t, sx.body)
	for name, rows := range files {
		if fmt.Sprint(shared[name]) != fmt.Sprint(rows) {
			t.Errorf("%s through the share differs:\n%v\nwith the key:\n%v", name, shared[name], rows)
		}
	}
	if r := do(t, "GET", n.base+"/v1/sites/"+site+"/stats/export?tz=Nowhere/Else", n.key, ""); r.status != 400 {
		t.Errorf("a bad zone: got %d; want 400", r.status)
	}
}

// TestE2EShareClusterAggregatorElsewhere: the viewer reaches an edge whose
// aggregator is another node. The edge checks the share, unlocks the
// password, and proxies the stats to the aggregator, which checks the
// share again against its own replica; a revocation holds on both.
func TestE2EShareClusterAggregatorElsewhere(t *testing.T) {
	c := newCluster(t)
	agg := c.start("agg", "us", "voter,aggregator", "", "--bootstrap-expect", "1")
	edge := c.start("edge", "eu", "edge", agg.gossip, "--aggregator-url", "http://"+agg.http, "--ingest-ip-rate", "100000",
		"--trusted-proxies", "127.0.0.0/8") // the test names its visitors in X-Forwarded-For
	waitFor(t, "both ready", 60*time.Second, func() bool { return ready(t, agg) && ready(t, edge) })
	key := c.createOwner("agg", "alice")
	eb, ab := "http://"+edge.http, "http://"+agg.http
	r := do(t, "POST", eb+"/v1/sites", key, `{"domain":"cluster.example","timezone":"UTC"}`)
	if r.status != 201 {
		t.Fatalf("create site: %d %s", r.status, r.body)
	}
	site := r.json(t)["id"].(string)
	waitFor(t, "the site on the edge's replica", 30*time.Second, func() bool {
		return do(t, "GET", eb+"/v1/sites/"+site, key, "").status == 200
	})
	shareEvents(t, eb, "cluster.example", "10.4.0")
	waitFor(t, "the edge's events shipped and counted", 60*time.Second, func() bool {
		r := do(t, "GET", eb+"/v1/sites/"+site+"/stats/aggregate", key, "")
		return r.status == 200 && r.json(t)["pageviews"] == float64(4)
	})

	shareURL, id := createShare(t, eb, key, "/v1/sites/"+site, `{"password":"p4ss-word"}`)
	tok := strings.TrimPrefix(shareURL, eb+"/share/")
	form := "application/x-www-form-urlencoded"
	ok := do(t, "POST", shareURL, "", "password=p4ss-word", "Content-Type", form)
	if ok.status != 303 {
		t.Fatalf("unlock on the edge: %d %s", ok.status, ok.body)
	}
	cookie := strings.SplitN(ok.header.Get("Set-Cookie"), ";", 2)[0]
	agree := func(base string) {
		t.Helper()
		var m map[string]any
		waitFor(t, "the share on "+base, 30*time.Second, func() bool {
			r := do(t, "GET", base+"/share/"+tok+"/v1/sites/"+site+"/stats/aggregate", "", "", "Cookie", cookie)
			if r.status != 200 {
				return false
			}
			m = r.json(t)
			return true
		})
		if m["visitors"] != float64(3) || m["pageviews"] != float64(4) || m["visits"] != float64(3) {
			t.Errorf("aggregate through the share on %s: %v; want visitors 3, pageviews 4, visits 3 (by hand)", base, m)
		}
	}
	agree(eb) // proxied to the aggregator
	agree(ab) // the edge's cookie, accepted by the aggregator node
	if r := do(t, "GET", shareURL+"/v1/sites/"+site+"/stats/aggregate", "", ""); r.status != 401 {
		t.Errorf("without the cookie on the edge: got %d; want 401", r.status)
	}
	x := do(t, "GET", shareURL+"/v1/sites/"+site+"/stats/export", "", "", "Cookie", cookie)
	if x.status != 200 {
		t.Fatalf("export through the share on the edge: %d %s", x.status, x.body)
	}
	if rows := readZip(t, x.body)["visitors.csv"]; len(rows) != 1+8 || strings.Join(rows[8][1:4], ",") != "3,4,3" {
		t.Errorf("visitors.csv through the edge: %v; want 8 days, today 3 visitors, 4 pageviews, 3 visits (by hand)", rows)
	}
	if x.header.Get("Content-Length") != "" {
		t.Errorf("the export through the edge has a Content-Length (%s): the edge buffered it", x.header.Get("Content-Length"))
	}
	// With a key too, through the edge's stats proxy.
	kx := do(t, "GET", eb+"/v1/sites/"+site+"/stats/export", key, "")
	if kx.status != 200 || kx.header.Get("Content-Type") != "application/zip" || kx.header.Get("Content-Length") != "" {
		t.Fatalf("export with a key through the edge: %d %v", kx.status, kx.header)
	}
	if files := readZip(t, kx.body); len(files["visitors.csv"]) != 1+8 {
		t.Errorf("visitors.csv with a key through the edge: %v", files["visitors.csv"])
	}
	if r := do(t, "GET", eb+"/v1/sites/"+site+"/stats/export?tz=Nowhere/Else", key, ""); r.status != 400 || r.header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("a bad export through the edge: %d %s; want a 400 problem", r.status, r.header.Get("Content-Type"))
	}

	if r := do(t, "DELETE", eb+"/v1/sites/"+site+"/shares/"+id, key, ""); r.status != 204 {
		t.Fatalf("revoke through the edge: %d %s", r.status, r.body)
	}
	for _, base := range []string{eb, ab} {
		waitFor(t, "the revocation applied on "+base, 30*time.Second, func() bool {
			return do(t, "GET", base+"/share/"+tok+"/v1/sites/"+site+"/stats/aggregate", "", "", "Cookie", cookie).status == 404
		})
		if r := do(t, "GET", base+"/share/"+tok, "", ""); r.status != 404 {
			t.Errorf("the revoked share's page on %s: got %d; want 404", base, r.status)
		}
	}
}
