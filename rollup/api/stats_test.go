package api

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/waymark/waymark/rollup/internal/world"
)

func TestStatsHTTPTenantIsolation(t *testing.T) {
	w := world.Generate(3)
	a := feedWorld(t, w)
	url := startStats(t, a)
	const q = "?from=2026-11-27&to=2026-11-30"
	linkPaths := func(code string) []string {
		return []string{
			"/v1/links/" + code + "/stats" + q + "&granularity=day",
			"/v1/links/" + code + "/stats/breakdown" + q + "&dimension=country",
			"/v1/links/" + code + "/stats/realtime",
		}
	}
	sitePaths := func(id string) []string {
		var out []string
		for _, p := range []string{"aggregate", "timeseries", "breakdown", "realtime"} {
			out = append(out, "/v1/sites/"+id+"/stats/"+p+q+"&dimension=page")
		}
		return out
	}
	v2 := func(domain string) string {
		return `{"site_id":"` + domain + `","metrics":["visitors","pageviews"],"date_range":"7d"}`
	}
	for _, c := range []struct {
		key, ownLink, ownSite, ownDomain, otherLink, otherSite, otherDomain string
	}{
		{"key-a", world.Code, world.Site, "ny.example", "bcode01", "site-b", "b.example"},
		{"key-b", "bcode01", "site-b", "b.example", world.Code, world.Site, "ny.example"},
	} {
		for _, p := range append(linkPaths(c.ownLink), sitePaths(c.ownSite)...) {
			if st, _, body := world.Call(t, "GET", url+p, c.key, ""); st != 200 {
				t.Errorf("%s with %s: got %d %s; want 200", p, c.key, st, body)
			}
		}
		for _, p := range append(linkPaths(c.otherLink), sitePaths(c.otherSite)...) {
			st, ct, body := world.Call(t, "GET", url+p, c.key, "")
			if st != 404 || ct != "application/problem+json" || !bytes.Contains(body, []byte(`"/problems/not-found"`)) {
				t.Errorf("%s with %s: got %d %s %s; want 404 not-found problem", p, c.key, st, ct, body)
			}
			if st, _, _ := world.Call(t, "GET", url+p, "", ""); st != 401 {
				t.Errorf("%s without a key: got %d; want 401", p, st)
			}
		}
		if st, _, body := world.Call(t, "POST", url+"/api/v2/query", c.key, v2(c.ownDomain)); st != 200 {
			t.Errorf("v2 own site with %s: got %d %s; want 200", c.key, st, body)
		}
		if st, _, _ := world.Call(t, "POST", url+"/api/v2/query", c.key, v2(c.otherDomain)); st != 404 {
			t.Errorf("v2 other's site with %s: got %d; want 404", c.key, st)
		}
	}
	if st, _, body := world.Call(t, "GET", url+"/v1/sites/"+world.Site+"/stats/breakdown?dimension=nope", "key-a", ""); st != 400 || !bytes.Contains(body, []byte("/problems/invalid-request")) {
		t.Errorf("bad dimension: got %d %s; want 400 invalid-request", st, body)
	}
	// Stats problems carry the same titles and instance as the rest of the
	// API (RFC 9457: title is the type's fixed summary, instance the path).
	path := "/v1/links/" + world.Code + "/stats/nope"
	want := `{"type":"/problems/not-found","title":"Not found","status":404,"detail":"no such endpoint","instance":"` + path + `"}` + "\n"
	if st, ct, body := world.Call(t, "GET", url+path, "key-a", ""); st != 404 || ct != "application/problem+json" || string(body) != want {
		t.Errorf("unknown stats endpoint: got %d %s %s; want 404 %s", st, ct, body, want)
	}
	want = `{"type":"/problems/unauthorized","title":"Unauthorized","status":401,"detail":"a valid API key is required","instance":"/v1/links/` + world.Code + `/stats"}` + "\n"
	if st, _, body := world.Call(t, "GET", url+"/v1/links/"+world.Code+"/stats", "", ""); st != 401 || string(body) != want {
		t.Errorf("stats without a key: got %d %s; want 401 %s", st, body, want)
	}
}

// TestStatsHTTPAnswers checks the JSON shapes against the reference.
func TestStatsHTTPAnswers(t *testing.T) {
	w := world.Generate(4)
	a := feedWorld(t, w)
	url := startStats(t, a)
	ny := world.MustLoc(t, world.TZ)
	from, to := time.Date(2026, 11, 28, 0, 0, 0, 0, ny), time.Date(2026, 11, 30, 0, 0, 0, 0, ny)

	_, _, body := world.Call(t, "GET", url+"/v1/links/"+world.Code+"/stats?from=2026-11-28&to=2026-11-29&tz="+world.TZ, "key-a", "")
	var ls struct {
		Totals struct {
			Clicks, BotClicks int64
			UniqueVisitors    uint64 `json:"unique_visitors"`
		}
		Series    []map[string]any
		Estimated []string
	}
	if err := json.Unmarshal(body, &ls); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	clicks, _, uniques, _ := w.RefClicks(from, to)
	world.WantEqual(t, "clicks", ls.Totals.Clicks, clicks)
	world.WantEstimate(t, "unique visitors", ls.Totals.UniqueVisitors, uniques)
	world.WantEqual(t, "series length", len(ls.Series), 2)
	world.WantEqual(t, "estimated", strings.Join(ls.Estimated, ","), "unique_visitors")

	// Site aggregate: the site's own zone by default.
	_, _, body = world.Call(t, "GET", url+"/v1/sites/"+world.Site+"/stats/aggregate?from=2026-11-28&to=2026-11-29", "key-a", "")
	var agg SiteAggregateAnswer
	if err := json.Unmarshal(body, &agg); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	ref := w.RefSite(from, to)
	want := ref.Metrics()
	world.WantEstimate(t, "visitors", agg.Visitors, ref.Visitors)
	agg.SiteMetrics.Visitors = 0
	if agg.SiteMetrics != want {
		t.Errorf("aggregate: got %+v; want %+v", agg.SiteMetrics, want)
	}

	// The same through the Plausible v2 query.
	_, _, body = world.Call(t, "POST", url+"/api/v2/query", "key-a",
		`{"site_id":"ny.example","metrics":["visitors","visits","pageviews","bounce_rate","events"],"date_range":["2026-11-28","2026-11-29"]}`)
	var v2 struct {
		Results []struct {
			Metrics    []float64
			Dimensions []string
		}
		Meta  map[string]any
		Query map[string]any
	}
	if err := json.Unmarshal(body, &v2); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	if len(v2.Results) != 1 {
		t.Fatalf("v2 results: got %s; want one row", body)
	}
	m := v2.Results[0].Metrics
	world.WantEstimate(t, "v2 visitors", uint64(m[0]), ref.Visitors)
	world.WantEqual(t, "v2 visits", int64(m[1]), want.Visits)
	world.WantEqual(t, "v2 pageviews", int64(m[2]), want.Pageviews)
	world.WantEqual(t, "v2 bounce_rate", m[3], want.BounceRate)
	world.WantEqual(t, "v2 events", int64(m[4]), want.Events)
	if !strings.Contains(string(body), `"estimated_metrics":["visitors"]`) {
		t.Errorf("v2 meta does not mark visitors as estimated: %s", body)
	}

	// v2 breakdown by page, filtered on the same dimension.
	_, _, body = world.Call(t, "POST", url+"/api/v2/query", "key-a",
		`{"site_id":"ny.example","metrics":["pageviews"],"date_range":["2026-11-28","2026-11-29"],"dimensions":["event:page"],"filters":[["contains","event:page",["blog"]]],"order_by":[["pageviews","desc"]]}`)
	if err := json.Unmarshal(body, &v2); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	world.WantEqual(t, "v2 blog pages", len(v2.Results), 2)
	for _, r := range v2.Results {
		world.WantEqual(t, "v2 pageviews of "+r.Dimensions[0], int64(r.Metrics[0]), ref.PagePV[r.Dimensions[0]])
	}
	// v2 time series by day.
	_, _, body = world.Call(t, "POST", url+"/api/v2/query", "key-a",
		`{"site_id":"ny.example","metrics":["pageviews"],"date_range":["2026-11-28","2026-11-29"],"dimensions":["time:day"]}`)
	if err := json.Unmarshal(body, &v2); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	var sum int64
	for _, r := range v2.Results {
		sum += int64(r.Metrics[0])
	}
	world.WantEqual(t, "v2 daily pageviews sum", sum, want.Pageviews)
}
