package main

// Browser tests of the dashboard (issue 5, item 5). They reuse the headless
// Chromium helpers of e2e_browser_test.go (startBrowser, requireTool,
// evaluate) and the node harness (startTrackedNode, do, waitFor).
//
// TestE2EDashboardStub renders the embedded dashboard against a stub of the
// stats API with fixed seeded data. The stub is acceptable ONLY for this
// rendering test: it pins what the page must draw for known numbers, and it
// runs before the real stats API exists. TestE2EDashboardRealNode checks
// the same page against a real `waymark node --dev`.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	rollupapi "github.com/waymark/waymark/rollup/api"
)

// dashShotPath is where the dashboard screenshot is copied for people to
// look at after a run.
const dashShotPath = "/tmp/waymark-dashboard.png"

// dashView is what the test reads of the rendered page.
type dashView struct {
	State    string            `json:"state"`  // #totals data-state
	Source   string            `json:"source"` // the stats request the totals came from
	Title    string            `json:"title"`
	Totals   map[string]string `json:"totals"` // metric -> data-value
	Texts    map[string]string `json:"texts"`  // metric -> text shown
	Points   map[string]int    `json:"points"` // series -> points in its SVG path
	PathCmds map[string]int    `json:"cmds"`   // series -> M/L commands in its d attribute
	Live     string            `json:"live"`
	Banner   string            `json:"banner"`
	Rows     map[string]int    `json:"rows"` // breakdown dimension -> rows shown
	Recent   int               `json:"recent"`
	Overflow bool              `json:"overflow"` // wider than the window
}

const readDashView = `(() => {
  const q = (s) => document.querySelector(s);
  const v = {state: q('#totals')?.dataset.state || '', source: q('#totals')?.dataset.source || '',
    title: q('#subject-title')?.textContent || '', totals: {}, texts: {}, points: {}, cmds: {}, rows: {},
    live: q('.stat-live .stat-value')?.dataset.value || '', banner: q('#banner')?.hidden ? '' : (q('#banner')?.textContent || ''),
    recent: document.querySelectorAll('#recent .recent-row').length,
    overflow: document.documentElement.scrollWidth > window.innerWidth + 1};
  for (const s of document.querySelectorAll('#totals .stat:not(.stat-live)')) {
    const val = s.querySelector('.stat-value');
    v.totals[s.dataset.metric] = val.dataset.value || '';
    v.texts[s.dataset.metric] = val.textContent;
  }
  for (const p of document.querySelectorAll('#chart path.line')) {
    v.points[p.dataset.series] = +p.dataset.points;
    v.cmds[p.dataset.series] = (p.getAttribute('d').match(/[ML]/g) || []).length;
  }
  for (const c of document.querySelectorAll('.breakdown[data-state=ready]')) {
    v.rows[c.dataset.dimension] = c.querySelectorAll('.bar-row').length;
  }
  return v;
})()`

// dashPage drives the dashboard in one tab.
type dashPage struct {
	t   *testing.T
	br  *headlessBrowser
	ctx context.Context
}

func (p *dashPage) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v\n%s", what, err, p.br.diagnostics())
	}
}

func (p *dashPage) view() dashView {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[dashView](readDashView))
	if err != nil {
		p.t.Fatalf("read the page: %v\n%s", err, p.br.diagnostics())
	}
	return v
}

// waitReady waits until the totals come from a request whose path contains
// source and every breakdown card has finished loading.
func (p *dashPage) waitReady(source string) dashView {
	p.t.Helper()
	cond := fmt.Sprintf(`(() => { const t = document.querySelector('#totals');
	  return !!t && (t.dataset.state === 'ready' || t.dataset.state === 'error') && (t.dataset.source || '').includes(%q) &&
	    !document.querySelector('.breakdown[data-state=loading]'); })()`, source)
	if _, err := chromedp.Run(p.ctx, chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		p.t.Fatalf("the report for %s did not finish loading: %v\npage: %+v\n%s", source, err, p.view(), p.br.diagnostics())
	}
	return p.view()
}

func (p *dashPage) waitFor(what, cond string) {
	p.t.Helper()
	if _, err := chromedp.Run(p.ctx, chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		p.t.Fatalf("waiting for %s: %v\npage: %+v\n%s", what, err, p.view(), p.br.diagnostics())
	}
}

// connect types the API key into the key form and submits it.
func (p *dashPage) connect(key string) {
	p.t.Helper()
	p.do("enter the API key",
		chromedp.WaitVisible(chromedp.CSS("#key")),
		evaluate(`document.querySelector('#key').value = ''`),
		chromedp.SendKeys(chromedp.CSS("#key"), key),
		chromedp.Click(chromedp.CSS("#connect-btn")),
	)
}

// screenshot saves a full-page PNG in dir and returns its path.
func (p *dashPage) screenshot(dir, name string) string {
	p.t.Helper()
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	return path
}

// noExceptions fails the test if the page threw anything.
func (p *dashPage) noExceptions() {
	p.t.Helper()
	p.br.mu.Lock()
	defer p.br.mu.Unlock()
	for _, line := range p.br.console {
		if strings.HasPrefix(line, "exception:") || strings.HasPrefix(line, "console.error:") {
			p.t.Errorf("the dashboard logged %q", line)
		}
	}
}

// ovItem is one item of a link's overview: its text and data-value.
type ovItem struct {
	Text  string `json:"text"`
	Value string `json:"value"`
}

// waitOverview waits for the link overview and reads it by key.
func (p *dashPage) waitOverview() map[string]ovItem {
	p.t.Helper()
	p.waitFor("the link overview", `document.querySelector('#overview').dataset.state === 'ready'`)
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[map[string]ovItem](`(() => { const o = {};
	  for (const it of document.querySelectorAll('#overview [data-overview]')) {
	    const v = it.querySelector('.ov-value'); o[it.dataset.overview] = {text: v.textContent, value: v.dataset.value ?? ''}; }
	  return o; })()`))
	if err != nil {
		p.t.Fatalf("read the overview: %v", err)
	}
	return v
}

// barRow is one row of a breakdown card.
type barRow struct {
	Label string `json:"label"`
	Count string `json:"count"`
}

// showTab clicks the tab of a breakdown dimension (or finds the card that
// shows it first) and reads its rows once loaded.
func (p *dashPage) showTab(dim string) []barRow {
	p.t.Helper()
	p.do("show "+dim, evaluate(fmt.Sprintf(`(() => { const b = document.querySelector('.tab[data-dim=%q]'); if (b) b.click(); })()`, dim)))
	sel := fmt.Sprintf(`.breakdown[data-dimension=%q][data-state=ready]`, dim)
	p.waitFor(dim+" rows", fmt.Sprintf(`!!document.querySelector(%q)`, sel))
	rows, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]barRow](fmt.Sprintf(`[...document.querySelectorAll(%q)].map((r) =>
	  ({label: r.querySelector('.bar-text').textContent, count: r.querySelector('.bar-num').dataset.value}))`, sel+" .bar-row:not(.skeleton)")))
	if err != nil {
		p.t.Fatalf("read %s rows: %v", dim, err)
	}
	return rows
}

// goalRow is one row of the goals card.
type goalRow struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Uniques string `json:"uniques"`
	Total   string `json:"total"`
	CR      string `json:"cr"`
	CRText  string `json:"crText"`
}

func (p *dashPage) waitGoals() []goalRow {
	p.t.Helper()
	p.waitFor("the goals", `document.querySelector('#goals-card').dataset.state === 'ready'`)
	rows, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]goalRow](`[...document.querySelectorAll('#goals .goal-row')].map((r) => ({
	  id: r.dataset.goal, name: r.querySelector('.bar-text').textContent, uniques: r.querySelector('.goal-uniques').dataset.value,
	  total: r.querySelector('.goal-total').dataset.value, cr: r.querySelector('.goal-cr').dataset.value,
	  crText: r.querySelector('.goal-cr').textContent}))`))
	if err != nil {
		p.t.Fatalf("read the goals: %v", err)
	}
	return rows
}

// heatView is what the test reads of the heatmap: every cell that is not
// zero, keyed "day hour", and the note under it.
type heatView struct {
	Metric string           `json:"metric"`
	Cells  int              `json:"cells"`
	Max    int64            `json:"max"`
	Values map[string]int64 `json:"values"`
	Note   string           `json:"note"`
}

func (p *dashPage) waitHeatmap() heatView {
	p.t.Helper()
	p.waitFor("the heatmap", `document.querySelector('#heatmap-card').dataset.state === 'ready'`)
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[heatView](`(() => { const v = {metric: document.querySelector('#heatmap table')?.dataset.metric || '',
	  cells: 0, max: 0, values: {}, note: document.querySelector('#heatmap-note').textContent};
	  for (const c of document.querySelectorAll('#heatmap td.hm-cell')) { v.cells++; const n = +c.dataset.value;
	    if (n) { v.values[c.dataset.day + ' ' + c.dataset.hour] = n; v.max = Math.max(v.max, n); } }
	  return v; })()`))
	if err != nil {
		p.t.Fatalf("read the heatmap: %v", err)
	}
	return v
}

func openDashboard(t *testing.T, br *headlessBrowser, url string) *dashPage {
	t.Helper()
	ctx, cancel := context.WithTimeout(br.ctx, 45*time.Second)
	t.Cleanup(cancel)
	p := &dashPage{t: t, br: br, ctx: ctx}
	p.do("load the dashboard", chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("#connect-form")))
	return p
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatalf("cannot copy the screenshot to %s: %v", to, err)
	}
}

// TestE2EDashboardStub loads the dashboard in headless Chromium against the
// stub stats API: a wrong key is refused with the server's reason, the right
// key lists the owner's links, choosing one shows its seeded totals, a chart
// path with one point per series entry, breakdowns and the live counter;
// switching range and switching to a site redraw everything; a phone-sized
// window needs no sideways scrolling. Screenshots go to t.TempDir() and
// dashShotPath.
func TestE2EDashboardStub(t *testing.T) {
	br := startBrowser(t)
	stub := startDashStub(t)
	p := openDashboard(t, br, stub.base+rollupapi.DashboardPath)

	p.connect("wm_not_a_key")
	p.waitFor("the refusal", `!document.querySelector('#connect-error').hidden`)
	msg, _ := chromedp.Run(p.ctx, chromedp.Text(chromedp.CSS("#connect-error")))
	if !strings.Contains(msg, "not accepted") || !strings.Contains(msg, stubBadKeyDetail) {
		t.Errorf("refusal: got %q; want it to say the key was not accepted and %q", msg, stubBadKeyDetail)
	}

	dir := t.TempDir()
	if d := os.Getenv("WAYMARK_E2E_ARTIFACTS"); d != "" {
		dir = d
	}
	t.Logf("dashboard screenshot (key refused): %s", p.screenshot(dir, "dashboard-connect.png"))

	p.connect(stubKey)
	p.waitFor("the link list", fmt.Sprintf(`document.querySelectorAll('#link-select option').length === %d`, len(stubLinks)))
	first := p.waitReady("/v1/links/" + stubLinks[0].Code + "/stats")
	if first.Banner != "" {
		t.Errorf("banner on the first report: %q", first.Banner)
	}

	// Choose the second link, as an owner would.
	chosen := stubLinks[1]
	p.do("choose a link", evaluate(fmt.Sprintf(`(() => { const s = document.querySelector('#link-select');
	  s.value = %q; s.dispatchEvent(new Event('change', {bubbles: true})); })()`, chosen.Code)))
	v := p.waitReady("/v1/links/" + chosen.Code + "/stats")
	checkLinkView(t, v, chosen, 7)
	ov := p.waitOverview()
	wantOv := stubOverview(chosen)
	for k, field := range map[string]string{"today": "today", "yesterday": "yesterday", "last7": "last_7_days", "last30": "last_30_days"} {
		if want := fmt.Sprint(wantOv[field].(map[string]any)["clicks"]); ov[k].Value != want {
			t.Errorf("overview %s: got %q; want %s", k, ov[k].Value, want)
		}
	}
	if want := fmt.Sprint(wantOv["all_time_clicks"]); ov["all_time"].Value != want {
		t.Errorf("overview all time: got %q; want %s", ov["all_time"].Value, want)
	}
	if g := wantOv["daily_growth"].(float64); ov["daily_growth"].Value != fmt.Sprint(g) || !strings.HasSuffix(ov["daily_growth"].Text, "%") {
		t.Errorf("overview daily growth: got %+v; want %v as a percent", ov["daily_growth"], g)
	}
	if ov["peak_hour"].Text != "14:00–15:00" || !strings.Contains(ov["last_click"].Text, "ago") && ov["last_click"].Text != "just now" {
		t.Errorf("overview peak hour %+v, last click %+v; want 14:00–15:00 and seconds ago", ov["peak_hour"], ov["last_click"])
	}
	if v.Live != "9" {
		p.waitFor("the live counter", `document.querySelector('.stat-live .stat-value').dataset.value === '9'`)
	}
	p.waitFor("the latest clicks", `document.querySelectorAll('#recent .recent-row').length === 6`)

	p.do("show today", chromedp.Click(chromedp.CSS(`#range button[data-range="today"]`)))
	p.waitFor("today by the hour", `(document.querySelector('#totals').dataset.source || '').includes('granularity=hour') &&
	  document.querySelector('#totals').dataset.state === 'ready' && !document.querySelector('.breakdown[data-state=loading]')`)
	checkLinkView(t, p.view(), chosen, 1)

	p.do("show 30 days", chromedp.Click(chromedp.CSS(`#range button[data-range="30d"]`)))
	v = p.waitReady("granularity=day")
	p.waitFor("30 days", `(document.querySelector('#totals').dataset.source || '').includes('/`+chosen.Code+`/') && document.querySelector('#chart path.line').dataset.points === '30'`)
	v = p.view()
	checkLinkView(t, v, chosen, 30)
	if err := hoverChart(p); err != nil {
		t.Errorf("hover: %v", err)
	}

	shot := p.screenshot(dir, "dashboard-link.png")
	t.Logf("dashboard screenshot (link, 30 days): %s", shot)

	// A site: aggregate numbers with their own formats.
	p.do("switch to sites", chromedp.Click(chromedp.CSS(`#kind button[data-kind="site"]`)),
		chromedp.WaitVisible(chromedp.CSS("#site-id")),
		chromedp.SendKeys(chromedp.CSS("#site-id"), stubSiteID),
		chromedp.Click(chromedp.CSS("#site-form button")))
	sv := p.waitReady("/v1/sites/" + stubSiteID + "/stats/aggregate")
	wantSite := map[string]string{"visitors": "3482", "visits": "4210", "pageviews": "9874", "views_per_visit": "2.35", "bounce_rate": "41.2", "visit_duration": "143"}
	for k, want := range wantSite {
		if sv.Totals[k] != want {
			t.Errorf("site total %s: got %q; want %q", k, sv.Totals[k], want)
		}
	}
	for k, want := range map[string]string{"bounce_rate": "41%", "visit_duration": "2m 23s", "views_per_visit": "2.35"} {
		if sv.Texts[k] != want {
			t.Errorf("site total %s shows %q; want %q", k, sv.Texts[k], want)
		}
	}
	if sv.Points["visitors"] != 30 || sv.Points["pageviews"] != 30 {
		t.Errorf("site chart points: got %v; want 30 per series", sv.Points)
	}
	if sv.Rows["page"] != 6 {
		t.Errorf("top pages: got %d rows; want 5 pages and the other row (%v)", sv.Rows["page"], sv.Rows)
	}
	// Entry and exit pages, channels: tabs of their cards, by dimension=.
	for dim, want := range map[string]int{"entry_page": 5, "exit_page": 5, "channel": 5} {
		rows := p.showTab(dim)
		if len(rows) != want {
			t.Errorf("%s: got %d rows %v; want %d with the other row", dim, len(rows), rows, want)
		}
	}
	if rows := p.showTab("source"); len(rows) == 0 || rows[0].Label != "Direct / None" {
		t.Errorf("sources: got %v; want Direct / None first (the empty source)", rows)
	}
	goals := p.waitGoals()
	if len(goals) != 4 || goals[0].Name != "Signup" || goals[0].Uniques != "412" || goals[0].CRText != "11.83%" || goals[3].Uniques != "0" {
		t.Errorf("goals: got %+v; want the stub's four, Signup first with 412 uniques at 11.83%%", goals)
	}
	hm := p.waitHeatmap()
	if hm.Cells != 168 || hm.Max != 64 || !strings.HasPrefix(hm.Note, "Busiest: Monday 14:00 (64 pageviews)") {
		t.Errorf("heatmap: got %+v; want 168 cells, Monday 14 h busiest with 64", hm)
	}
	p.waitFor("current visitors", `document.querySelector('.stat-live .stat-value').dataset.value === '17'`)
	p.showTab("page")
	siteShot := p.screenshot(dir, "dashboard.png")
	copyFile(t, siteShot, dashShotPath)
	t.Logf("dashboard screenshot (site): %s (copied to %s)", siteShot, dashShotPath)

	// An unknown site: a clear message, no numbers, no exception.
	p.do("ask for another owner's site", evaluate(`document.querySelector('#site-id').value = 'site_other'`),
		chromedp.Click(chromedp.CSS("#site-form button")))
	ev := p.waitReady("/v1/sites/site_other/")
	if ev.State != "error" || !strings.Contains(ev.Banner, stubNotFoundDetail) {
		t.Errorf("unknown site: got state %q banner %q; want error and %q", ev.State, ev.Banner, stubNotFoundDetail)
	}

	// Phone width: everything stacks, nothing scrolls sideways.
	p.do("go back to the link", chromedp.Click(chromedp.CSS(`#kind button[data-kind="link"]`)))
	p.waitReady("/v1/links/" + chosen.Code + "/stats")
	p.do("narrow the window", chromedp.EmulateViewport(390, 844))
	p.waitFor("the chart redrawn narrow", `document.querySelector('#chart svg').getAttribute('width') < 390`)
	if nv := p.view(); nv.Overflow {
		t.Errorf("at 390 px wide the page scrolls sideways")
	}
	mobile := p.screenshot(dir, "dashboard-phone.png")
	t.Logf("dashboard screenshot (390 px): %s", mobile)

	p.noExceptions()
	br.close(t)
	stub.check(t)
}

// hoverChart moves the mouse over the middle of the chart and checks the
// tooltip appears.
func hoverChart(p *dashPage) error {
	box, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]float64](`(() => { const hit = document.querySelector('#chart .hit');
	  hit.scrollIntoView({block: 'center'}); const r = hit.getBoundingClientRect();
	  return [r.left + r.width * 0.62, r.top + r.height / 2]; })()`))
	if err != nil {
		return err
	}
	if err := chromedp.Do(p.ctx, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, box[0], box[1])); err != nil {
		return err
	}
	_, err = chromedp.Run(p.ctx, chromedp.Poll[bool](`!document.querySelector('#chart .tooltip').hidden`, chromedp.WithPollingTimeout(5*time.Second)))
	return err
}

// checkLinkView compares the page with the seeded numbers of a link over
// the last days.
func checkLinkView(t *testing.T, v dashView, l stubLink, days int) {
	t.Helper()
	want := stubTotals(l, days)
	if v.State != "ready" || v.Banner != "" {
		t.Errorf("%s, %d days: got state %q banner %q; want ready and no banner", l.Code, days, v.State, v.Banner)
	}
	if !strings.Contains(v.Title, l.Code) {
		t.Errorf("title: got %q; want it to name %s", v.Title, l.Code)
	}
	for k, n := range want {
		if v.Totals[k] != fmt.Sprint(n) {
			t.Errorf("%s, %d days, total %s: got %q; want %d", l.Code, days, k, v.Totals[k], n)
		}
		if digits := strings.Map(keepDigits, v.Texts[k]); digits != fmt.Sprint(n) {
			t.Errorf("%s, %d days, total %s shows %q; want the digits %d", l.Code, days, k, v.Texts[k], n)
		}
	}
	points := days
	if days == 1 {
		points = 24 // today, by the hour
	}
	for _, s := range []string{"clicks", "unique_visitors"} {
		if v.Points[s] != points || v.PathCmds[s] != points {
			t.Errorf("%s, %d days, %s path: got %d points (%d commands in d); want %d", l.Code, days, s, v.Points[s], v.PathCmds[s], points)
		}
	}
	if !strings.HasPrefix(v.Texts["unique_visitors"], "≈") {
		t.Errorf("unique visitors shows %q; want it marked as an estimate (≈)", v.Texts["unique_visitors"])
	}
	// Countries: six values plus the "other" row.
	if v.Rows["country"] != len(stubCountries)+1 {
		t.Errorf("country rows: got %d; want %d (%v)", v.Rows["country"], len(stubCountries)+1, v.Rows)
	}
}

func keepDigits(r rune) rune {
	if r >= '0' && r <= '9' {
		return r
	}
	return -1
}

// TestE2EDashboardRealNode runs the dashboard against a real
// `waymark node --dev`: it creates a link, clicks it, waits until the stats
// API counts the clicks, then checks that the totals the page shows are
// the API's.
func TestE2EDashboardRealNode(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		requireTool(t, "headless Chromium is not installed (%v); on Debian: apt-get install chromium", err)
	}
	n := startTrackedNode(t)
	if r := do(t, "GET", n.base+rollupapi.DashboardPath, "", ""); r.status != 200 {
		t.Fatalf("GET %s: got %d; want 200\n%s", rollupapi.DashboardPath, r.status, r.body)
	}
	created := do(t, "POST", n.base+"/v1/links", n.key, `{"url":"https://example.com/dashboard-e2e"}`)
	if created.status != 201 {
		t.Fatalf("create link: got %d %s; want 201", created.status, created.body)
	}
	code, _ := created.json(t)["code"].(string)
	statsURL := n.base + "/v1/links/" + code + "/stats"
	if r := do(t, "GET", statsURL, n.key, ""); r.status != 200 {
		t.Fatalf("GET /v1/links/{code}/stats for a link that exists: got %d %s; want 200", r.status, r.body)
	}

	const clicks = 5
	for i := range clicks {
		r := do(t, "GET", n.base+"/"+code, "", "", "User-Agent", dashHumanUA, "Referer", "https://news.example.org/item?id=1")
		if r.status != 302 {
			t.Fatalf("click %d: got %d; want 302", i, r.status)
		}
	}
	var api map[string]any
	waitFor(t, "the stats API to count the clicks", 30*time.Second, func() bool {
		r := do(t, "GET", statsURL, n.key, "")
		if r.status != 200 {
			return false
		}
		api = r.json(t)
		totals, _ := api["totals"].(map[string]any)
		c, _ := totals["clicks"].(float64)
		return c >= clicks
	})

	br := startBrowser(t)
	// Today: the clicks were just made, and 7 days end yesterday.
	p := openDashboard(t, br, n.base+rollupapi.DashboardPath+"#range=today")
	p.connect(n.key)
	v := p.waitReady("/v1/links/" + code + "/stats")
	if v.State != "ready" {
		t.Fatalf("the dashboard did not show the link's stats: state %q banner %q\n%s", v.State, v.Banner, br.diagnostics())
	}
	// Ask the API exactly what the page asked, and compare.
	r := do(t, "GET", n.base+v.Source, n.key, "")
	if r.status != 200 {
		t.Fatalf("GET %s: got %d %s; want 200", v.Source, r.status, r.body)
	}
	totals, _ := r.json(t)["totals"].(map[string]any)
	for _, k := range []string{"clicks", "unique_visitors", "bot_clicks"} {
		want, _ := totals[k].(float64)
		if v.Totals[k] != fmt.Sprint(want) {
			t.Errorf("total %s: the page shows %q; the API says %v", k, v.Totals[k], want)
		}
	}
	if c, _ := totals["clicks"].(float64); c < clicks {
		t.Errorf("clicks: the API says %v; want at least %d", c, clicks)
	}
	if series, _ := r.json(t)["series"].([]any); v.Points["clicks"] != len(series) {
		t.Errorf("chart: got %d points; the API series has %d", v.Points["clicks"], len(series))
	}
	dir := t.TempDir()
	if d := os.Getenv("WAYMARK_E2E_ARTIFACTS"); d != "" {
		dir = d
	}
	shot := p.screenshot(dir, "dashboard-node.png")
	t.Logf("dashboard on a real node: totals %v; screenshot %s", v.Totals, shot)
	p.noExceptions()
	br.close(t)
}

// TestE2EDashboardPanels seeds a real `waymark node --dev` with a small
// scenario and checks the panels the page draws against numbers worked
// out by hand from Plausible's definitions: entry and exit pages, sources
// and channels, goal conversions, the weekday x hour heatmap, and a link's
// overview. The browser runs in Tokyo time (UTC+9, no DST), so days and
// hours are the page's zone, not the server's.
//
// Visitors (one client address each, all now):
//
//	V1 10.9.0.1  / (from www.google.com)  /pricing  event Signup
//	V2 10.9.0.2  /blog/post-1?utm_source=newsletter&utm_medium=email  /blog/post-2
//	V3 10.9.0.3  /
//	V4 10.9.0.4  /pricing (from news.ycombinator.com)
//
// Goals: event Signup, page /blog/**, page /pricing. Link: 3 clicks from
// two addresses.
func TestE2EDashboardPanels(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		requireTool(t, "headless Chromium is not installed (%v); on Debian: apt-get install chromium", err)
	}
	const zone = "Asia/Tokyo"
	tokyo, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	n := startTrackedNode(t)
	r := do(t, "POST", n.base+"/v1/sites", n.key, `{"domain":"shop.example","timezone":"UTC"}`)
	if r.status != 201 {
		t.Fatalf("create site: got %d %s", r.status, r.body)
	}
	site, _ := r.json(t)["id"].(string)
	for _, g := range []string{`{"event_name":"Signup"}`, `{"page_path":"/blog/**"}`, `{"page_path":"/pricing"}`} {
		if r := do(t, "POST", n.base+"/v1/sites/"+site+"/goals", n.key, g); r.status != 201 {
			t.Fatalf("create goal %s: got %d %s", g, r.status, r.body)
		}
	}
	r = do(t, "POST", n.base+"/v1/links", n.key, `{"url":"https://example.com/panels"}`)
	if r.status != 201 {
		t.Fatalf("create link: got %d %s", r.status, r.body)
	}
	code, _ := r.json(t)["code"].(string)

	// Every event in one hour: the heatmap cell and "today" are then known
	// exactly. Events are stamped on arrival and sent within a second; the
	// page must still see the same Tokyo day a minute or two later.
	waitFor(t, "20 s before the next hour and 2 min before Tokyo's midnight", 150*time.Second, func() bool {
		now := time.Now()
		local := now.In(tokyo)
		midnight := time.Date(local.Year(), local.Month(), local.Day()+1, 0, 0, 0, 0, tokyo)
		return now.Truncate(time.Hour).Add(time.Hour).Sub(now) > 20*time.Second && midnight.Sub(now) > 2*time.Minute
	})
	t0 := time.Now()
	event := func(ip, body string) {
		t.Helper()
		r := do(t, "POST", n.base+"/api/event", "", body, "Content-Type", "text/plain", "Origin", "https://shop.example",
			"User-Agent", dashHumanUA, "X-Forwarded-For", ip)
		if r.status != 202 || r.header.Get("X-Waymark-Dropped") != "" {
			t.Fatalf("event %s: got %d dropped %q: %s", body, r.status, r.header.Get("X-Waymark-Dropped"), r.body)
		}
	}
	pv := func(ip, path, ref string) {
		event(ip, fmt.Sprintf(`{"n":"pageview","u":"https://shop.example%s","d":"shop.example","r":%q}`, path, ref))
	}
	pv("10.9.0.1", "/", "https://www.google.com/search?q=shop")
	pv("10.9.0.2", "/blog/post-1?utm_source=newsletter&utm_medium=email", "")
	pv("10.9.0.3", "/", "")
	pv("10.9.0.4", "/pricing", "https://news.ycombinator.com/item?id=1")
	pv("10.9.0.1", "/pricing", "")
	pv("10.9.0.2", "/blog/post-2", "")
	event("10.9.0.1", `{"n":"Signup","u":"https://shop.example/pricing","d":"shop.example"}`)
	for i, ip := range []string{"10.9.1.1", "10.9.1.2", "10.9.1.1"} {
		if r := do(t, "GET", n.base+"/"+code, "", "", "User-Agent", dashHumanUA, "X-Forwarded-For", ip); r.status != 302 {
			t.Fatalf("click %d: got %d; want 302", i, r.status)
		}
	}
	t1 := time.Now()
	if t0.Truncate(time.Hour) != t1.Truncate(time.Hour) {
		t.Fatalf("BUG: seeding took from %v to %v, across an hour", t0, t1)
	}
	today := t0.In(tokyo).Format(time.DateOnly)
	agg := n.base + "/v1/sites/" + site + "/stats/aggregate?from=" + today + "&to=" + today + "&tz=" + zone
	waitFor(t, "the rollups to hold the 6 pageviews and the event", 30*time.Second, func() bool {
		r := do(t, "GET", agg, n.key, "")
		m := r.json(t)
		return r.status == 200 && m["pageviews"] == 6.0 && m["events"] == 7.0
	})
	waitFor(t, "the rollups to hold the 3 clicks", 30*time.Second, func() bool {
		r := do(t, "GET", n.base+"/v1/links/"+code+"/stats/overview", n.key, "")
		return r.status == 200 && r.json(t)["all_time_clicks"] == 3.0
	})

	br := startBrowser(t)
	if _, err := chromedp.Call(br.ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: zone}); err != nil {
		t.Fatalf("set the browser's time zone: %v", err)
	}
	p := openDashboard(t, br, n.base+rollupapi.DashboardPath+"#site="+site+"&range=today")
	p.connect(n.key)
	v := p.waitReady("/v1/sites/" + site + "/stats/aggregate")
	if v.State != "ready" || v.Banner != "" || !strings.Contains(v.Source, "tz="+strings.ReplaceAll(zone, "/", "%2F")) {
		t.Fatalf("site report: state %q banner %q source %q; want ready, in %s\n%s", v.State, v.Banner, v.Source, zone, br.diagnostics())
	}
	wantRows := func(dim string, want ...barRow) {
		t.Helper()
		if got := p.showTab(dim); !slices.Equal(got, want) {
			t.Errorf("%s: got %v; want %v", dim, got, want)
		}
	}
	// Visits by the visit's first and last pageview; sources and channels
	// by its first event; ties by value.
	wantRows("entry_page", barRow{"/", "2"}, barRow{"/blog/post-1", "1"}, barRow{"/pricing", "1"})
	wantRows("exit_page", barRow{"/pricing", "2"}, barRow{"/", "1"}, barRow{"/blog/post-2", "1"})
	wantRows("source", barRow{"Direct / None", "1"}, barRow{"Google", "1"}, barRow{"Hacker News", "1"}, barRow{"newsletter", "1"})
	wantRows("channel", barRow{"Direct", "1"}, barRow{"Email", "1"}, barRow{"Organic Search", "1"}, barRow{"Organic Social", "1"})
	wantRows("page", barRow{"/", "2"}, barRow{"/pricing", "2"}, barRow{"/blog/post-1", "1"}, barRow{"/blog/post-2", "1"})

	// Conversions over the 4 visitors: /pricing 2 (50 %), Signup 1 and
	// /blog/** 1 with 2 completions (25 % each).
	goals := p.waitGoals()
	type g struct{ name, uniques, total, cr string }
	var got []g
	for _, r := range goals {
		got = append(got, g{r.Name, r.Uniques, r.Total, r.CRText})
	}
	if want := []g{{"Visit /pricing", "2", "2", "50%"}, {"Signup", "1", "1", "25%"}, {"Visit /blog/**", "1", "2", "25%"}}; !slices.Equal(got, want) {
		t.Errorf("goals: got %v; want %v", got, want)
	}

	// The heatmap: everything in today's cell, Tokyo time.
	local := t0.In(tokyo)
	cell := fmt.Sprintf("%d %d", (int(local.Weekday())+6)%7, local.Hour())
	hm := p.waitHeatmap()
	if hm.Metric != "pageviews" || hm.Cells != 168 || len(hm.Values) != 1 || hm.Values[cell] != 6 {
		t.Errorf("heatmap pageviews: got %+v; want 6 in cell %s only", hm, cell)
	}
	p.do("show visits", chromedp.Click(chromedp.CSS(`#heatmap-metric button[data-metric="visits"]`)))
	p.waitFor("the visits heatmap", `document.querySelector('#heatmap table').dataset.metric === 'visits'`)
	if hm = p.waitHeatmap(); len(hm.Values) != 1 || hm.Values[cell] != 4 {
		t.Errorf("heatmap visits: got %+v; want 4 in cell %s only", hm, cell)
	}
	dir := t.TempDir()
	if d := os.Getenv("WAYMARK_E2E_ARTIFACTS"); d != "" {
		dir = d
	}
	t.Logf("dashboard on a real node (site): %s", p.screenshot(dir, "dashboard-node-site.png"))

	// The link's overview: today only; nothing before, so no growth.
	p.do("switch to the link", chromedp.Click(chromedp.CSS(`#kind button[data-kind="link"]`)))
	p.do("choose the link", evaluate(fmt.Sprintf(`(() => { const s = document.querySelector('#link-select');
	  s.value = %q; s.dispatchEvent(new Event('change', {bubbles: true})); })()`, code)))
	p.waitReady("/v1/links/" + code + "/stats")
	ov := p.waitOverview()
	for k, want := range map[string]string{"today": "3", "yesterday": "0", "last7": "0", "last30": "0", "all_time": "3", "peak_hour": fmt.Sprint(local.Hour())} {
		if ov[k].Value != want {
			t.Errorf("overview %s: got %+v; want %s", k, ov[k], want)
		}
	}
	for _, k := range []string{"daily_growth", "weekly_growth"} {
		if ov[k].Text != "–" || ov[k].Value != "" {
			t.Errorf("overview %s: got %+v; want – (no clicks before)", k, ov[k])
		}
	}
	if lc, err := time.Parse(time.RFC3339, ov["last_click"].Value); err != nil || lc.Before(t0.Add(-time.Second)) || lc.After(t1.Add(time.Second)) {
		t.Errorf("last click: got %+v; want between %v and %v", ov["last_click"], t0, t1)
	}
	t.Logf("dashboard on a real node (link): %s", p.screenshot(dir, "dashboard-node-link.png"))
	p.noExceptions()
	br.close(t)
}

// dashHumanUA is a desktop Chrome: clicks with it are counted as people.
const dashHumanUA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
