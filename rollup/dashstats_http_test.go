package rollup

import (
	"bytes"
	"encoding/json"
	"net"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/rollup/api"
	"github.com/waymark/waymark/rollup/query"
	"github.com/waymark/waymark/store"
)

// dashAuth is testAuth plus the links and sites of the overview, heatmap
// and goal tests, all of owner-a.
type dashAuth struct{ testAuth }

func (d dashAuth) Link(code string) (store.Link, bool) {
	if code == "ovw1" {
		return store.Link{Code: code, Owner: "owner-a"}, true
	}
	return d.testAuth.Link(code)
}

func (d dashAuth) Site(id string) (store.Site, bool) {
	switch id {
	case goalSite.ID:
		return goalSite, true
	case "site-heat":
		return store.Site{ID: id, Domain: "heat.example", Timezone: "Europe/Berlin", Owner: "owner-a"}, true
	}
	return d.testAuth.Site(id)
}

func startDashStats(t *testing.T, a *Aggregator) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	srv := &fasthttp.Server{Handler: api.StatsHandler(a, dashAuth{}, api.Config{Now: a.cfg.Now, Logger: a.log})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	return "http://" + ln.Addr().String()
}

// TestStatsHTTPOverviewHeatmapGoals: the three endpoints over HTTP answer
// the hand-made scenarios of their own tests, in the JSON the dashboard
// reads, owner-scoped and with problems for bad parameters.
func TestStatsHTTPOverviewHeatmapGoals(t *testing.T) {
	a := openTest(t, testConfig(t, t.TempDir(), &testClock{now: base}))
	shipOverviewClicks(t, a, "ovw1")
	shipHeatmapEvents(t, a, "site-heat")
	shipGoalEvents(t, a)
	url := startDashStats(t, a)

	get := func(path, key string, want int) []byte {
		t.Helper()
		st, ct, body := call(t, "GET", url+path, key, "")
		if st != want {
			t.Fatalf("GET %s: got %d %s; want %d", path, st, body, want)
		}
		if want >= 400 && (ct != "application/problem+json" || !bytes.Contains(body, []byte(`"status":`))) {
			t.Errorf("GET %s: got %s %s; want a problem", path, ct, body)
		}
		return body
	}

	// Overview: the New York numbers of TestLinkOverview.
	var o struct {
		Timezone string
		Today    struct{ Clicks int64 }
		Last7    struct{ Clicks int64 } `json:"last_7_days"`
		Last30   struct {
			Clicks int64
			Coarse bool
		} `json:"last_30_days"`
		AllTime   int64                        `json:"all_time_clicks"`
		Daily     *float64                     `json:"daily_growth"`
		Weekly    *float64                     `json:"weekly_growth"`
		LastClick string                       `json:"last_click"`
		PeakHour  struct{ Hour, Clicks int64 } `json:"peak_hour"`
		Estimated []string
	}
	body := get("/v1/links/ovw1/stats/overview?tz=America/New_York", "key-a", 200)
	if err := json.Unmarshal(body, &o); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	wantEqual(t, "timezone", o.Timezone, "America/New_York")
	wantEqual(t, "today", o.Today.Clicks, 3)
	wantEqual(t, "last 7 days", o.Last7.Clicks, 7)
	wantEqual(t, "last 30 days", o.Last30.Clicks, 17)
	wantEqual(t, "last 30 days coarse", o.Last30.Coarse, true)
	wantEqual(t, "all time", o.AllTime, 22)
	wantGrowth(t, "daily growth", o.Daily, -25)
	wantGrowth(t, "weekly growth", o.Weekly, 16.7)
	wantEqual(t, "last click", o.LastClick, "2026-11-30T11:59:00Z")
	wantEqual(t, "peak hour", o.PeakHour, struct{ Hour, Clicks int64 }{9, 9})
	wantEqual(t, "estimated", len(o.Estimated), 5)
	// Without tz: UTC.
	body = get("/v1/links/ovw1/stats/overview", "key-a", 200)
	if err := json.Unmarshal(body, &o); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	wantEqual(t, "default timezone", o.Timezone, "UTC")
	wantEqual(t, "UTC today", o.Today.Clicks, 4)
	get("/v1/links/ovw1/stats/overview?tz=Mars/Olympus", "key-a", 400)
	get("/v1/links/ovw1/stats/overview", "key-b", 404)
	get("/v1/links/ovw1/stats/overview", "", 401)

	// Heatmap: period in the site's zone (Berlin) by default.
	var h query.Heatmap
	body = get("/v1/sites/site-heat/stats/heatmap?period=7d", "key-a", 200)
	if err := json.Unmarshal(body, &h); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	wantEqual(t, "heatmap zone", h.Timezone, "Europe/Berlin")
	wantEqual(t, "Wed 10 pageviews", h.Pageviews[2][10], 2)
	wantEqual(t, "Mon 00 visits", h.Visits[0][0], 2)
	wantEqual(t, "heatmap total pageviews", h.Total.Pageviews, 7)
	// from/to as the other site stats, here in UTC.
	body = get("/v1/sites/site-heat/stats/heatmap?from=2026-11-23&to=2026-11-29&tz=UTC", "key-a", 200)
	if err := json.Unmarshal(body, &h); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	wantEqual(t, "UTC Wed 09 pageviews", h.Pageviews[2][9], 2)
	wantEqual(t, "UTC Sun 22 visits", h.Visits[6][22], 1)
	for _, bad := range []string{"period=7x", "period=7d&from=2026-11-01", "period=0d", "period=7d&tz=Nowhere/City"} {
		get("/v1/sites/site-heat/stats/heatmap?"+bad, "key-a", 400)
	}
	get("/v1/sites/site-heat/stats/heatmap?period=7d", "key-b", 404)

	// Goals: the site's own goals from the authorizer.
	var g query.SiteGoals
	body = get("/v1/sites/site-goals/stats/goals?from=2026-11-29T10:00:00Z&to=2026-11-30T00:00:00Z", "key-a", 200)
	if err := json.Unmarshal(body, &g); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	wantEqual(t, "goal total visitors", g.TotalVisitors, 7)
	checkGoals(t, g.Goals, goalsByHand)
	if !bytes.Contains(body, []byte(`"goal_type":"page","event_name":null,"page_path":"/blog/*"`)) {
		t.Errorf("page goal JSON: %s", body)
	}
	// A site without goals: an empty list, not null.
	body = get("/v1/sites/site-heat/stats/goals?period=7d", "key-a", 200)
	if !bytes.Contains(body, []byte(`"goals":[]`)) {
		t.Errorf("no goals: %s", body)
	}
	get("/v1/sites/site-goals/stats/goals?period=30", "key-a", 400)
	get("/v1/sites/site-goals/stats/goals", "key-b", 404)

	// Channel is a site breakdown dimension.
	var bd query.SiteBreakdown
	body = get("/v1/sites/site-goals/stats/breakdown?dimension=channel&from=2026-11-29&to=2026-11-29", "key-a", 200)
	if err := json.Unmarshal(body, &bd); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	// pageview() refers from nowhere: every visit is Direct.
	if len(bd.Results) != 1 || bd.Results[0].Value != "Direct" || bd.Results[0].Visits != 7 {
		t.Errorf("channels: %s; want one row, Direct, 7 visits (visitors 1-6 and 9)", body)
	}
}
