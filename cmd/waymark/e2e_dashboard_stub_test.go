package main

// The stub stats API of TestE2EDashboardStub (e2e_dashboard_test.go):
// fixed seeded data in the shapes issue 5 fixes, served on loopback.

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/rollup/api"
)

// ---------------------------------------------------------------------
// The stub stats API (rendering test only): fixed seeded data in the
// shapes issue 5 fixes.
// ---------------------------------------------------------------------

const (
	stubKey            = "wm_stub_owner_key"
	stubSiteID         = "site_demo"
	stubBadKeyDetail   = "the API key is not valid"
	stubNotFoundDetail = "no such site for this owner"
)

type stubLink struct {
	Code  string
	URL   string
	Scale float64 // this link's traffic relative to the seed
}

var stubLinks = []stubLink{
	{"launch7", "https://example.com/blog/spring-launch", 0.4},
	{"Q4docs", "https://docs.example.org/getting-started/install?lang=en", 1},
	{"bf24sale", "https://shop.example.net/black-friday", 0.7},
}

var stubCountries = []struct {
	Code  string
	Share float64
}{{"DE", .27}, {"US", .22}, {"GB", .12}, {"FR", .08}, {"NL", .06}, {"JP", .04}}

// stubDaily is the seeded daily click count, index 0 = today.
var stubDaily = func() [30]float64 {
	rng := rand.New(rand.NewPCG(5, 2026))
	var d [30]float64
	for k := range d {
		day := float64(29 - k)
		weekday := 1.0
		if (29-k)%7 == 5 || (29-k)%7 == 6 {
			weekday = 0.72
		}
		d[k] = (210 + 4.2*day + 55*math.Sin(day/4.5) + rng.Float64()*40) * weekday
	}
	return d
}()

// stubSeries is the series of a link over the last days (oldest first), or
// the 24 hours of today when days is 1.
func stubSeries(l stubLink, days int) (clicks, uniques []int) {
	if days == 1 {
		for h := range 24 {
			v := l.Scale * (3 + 24*math.Exp(-math.Pow(float64(h)-14.5, 2)/18))
			clicks = append(clicks, int(math.Round(v)))
			uniques = append(uniques, int(math.Round(v*0.8)))
		}
		return clicks, uniques
	}
	for k := days - 1; k >= 0; k-- {
		v := math.Round(stubDaily[k] * l.Scale)
		clicks = append(clicks, int(v))
		uniques = append(uniques, int(math.Round(v*0.74)))
	}
	return clicks, uniques
}

func stubTotals(l stubLink, days int) map[string]int {
	clicks, _ := stubSeries(l, days)
	sum := 0
	for _, c := range clicks {
		sum += c
	}
	// Uniques over a range are fewer than the sum of daily uniques.
	return map[string]int{"clicks": sum, "unique_visitors": int(math.Round(float64(sum) * 0.61)), "bot_clicks": sum / 14}
}

type dashStub struct {
	base     string
	mu       sync.Mutex
	requests []string // path?query of every API request
	problems []string // requests the page should not have made like this
}

func startDashStub(t *testing.T) *dashStub {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &dashStub{base: "http://" + ln.Addr().String()}
	dashboard := api.DashboardHandler()
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == api.DashboardPath {
			dashboard(ctx)
			return
		}
		s.serveAPI(ctx)
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	return s
}

func (s *dashStub) serveAPI(ctx *fasthttp.RequestCtx) {
	s.mu.Lock()
	s.requests = append(s.requests, string(ctx.RequestURI()))
	if len(ctx.Request.Header.Peek("Cookie")) > 0 {
		s.problems = append(s.problems, "a cookie was sent with "+string(ctx.RequestURI()))
	}
	s.mu.Unlock()
	if string(ctx.Request.Header.Peek("Authorization")) != "Bearer "+stubKey {
		stubProblem(ctx, 401, "unauthorized", stubBadKeyDetail)
		return
	}
	path := string(ctx.Path())
	q := ctx.QueryArgs()
	days := stubDays(string(q.Peek("from")), string(q.Peek("to")))
	if path == "/v1/links" {
		var links []map[string]any
		for _, l := range stubLinks {
			links = append(links, map[string]any{"code": l.Code, "url": l.URL, "short_url": s.base + "/" + l.Code, "status": "active"})
		}
		stubJSON(ctx, map[string]any{"links": links, "next_cursor": nil})
		return
	}
	if rest, ok := strings.CutPrefix(path, "/v1/links/"); ok {
		code, sub, _ := strings.Cut(rest, "/stats")
		var link *stubLink
		for i := range stubLinks {
			if stubLinks[i].Code == code {
				link = &stubLinks[i]
			}
		}
		if link == nil {
			stubProblem(ctx, 404, "not-found", "no such link for this owner")
			return
		}
		switch sub {
		case "":
			s.needQuery(ctx, "from", "to", "tz", "granularity")
			stubJSON(ctx, stubLinkStats(*link, days, string(q.Peek("granularity"))))
		case "/breakdown":
			s.needQuery(ctx, "from", "to", "tz", "dimension")
			stubJSON(ctx, stubBreakdown(string(q.Peek("dimension")), stubTotals(*link, days)["clicks"], "clicks"))
		case "/realtime":
			stubJSON(ctx, stubRealtime())
		case "/overview":
			s.needQuery(ctx, "tz")
			stubJSON(ctx, stubOverview(*link))
		default:
			stubProblem(ctx, 404, "not-found", "there is no API endpoint at "+path)
		}
		return
	}
	if rest, ok := strings.CutPrefix(path, "/v1/sites/"); ok {
		id, sub, _ := strings.Cut(rest, "/stats/")
		if id != stubSiteID {
			stubProblem(ctx, 404, "not-found", stubNotFoundDetail)
			return
		}
		switch sub {
		case "aggregate":
			stubJSON(ctx, map[string]any{"visitors": 3482, "visits": 4210, "pageviews": 9874, "views_per_visit": 2.35, "bounce_rate": 41.2, "visit_duration": 143})
		case "timeseries":
			s.needQuery(ctx, "from", "to", "granularity")
			var series []map[string]any
			clicks, uniques := stubSeries(stubLink{Scale: 0.55}, days)
			for i := range clicks {
				series = append(series, map[string]any{"t": stubTime(days, i), "visitors": uniques[i], "pageviews": clicks[i] * 2})
			}
			stubJSON(ctx, map[string]any{"series": series})
		case "breakdown":
			s.needQuery(ctx, "from", "to", "tz", "dimension")
			stubJSON(ctx, stubBreakdown(string(q.Peek("dimension")), 3482, "site"))
		case "goals":
			s.needQuery(ctx, "from", "to", "tz")
			stubJSON(ctx, stubGoals)
		case "heatmap":
			s.needQuery(ctx, "from", "to", "tz")
			stubJSON(ctx, stubHeatmap())
		case "realtime":
			stubJSON(ctx, map[string]any{"current_visitors": 17, "pageviews_last_5_minutes": 41})
		default:
			stubProblem(ctx, 404, "not-found", "there is no API endpoint at "+path)
		}
		return
	}
	stubProblem(ctx, 404, "not-found", "there is no API endpoint at "+path)
}

// needQuery notes a stats request that lacks a parameter the API needs.
func (s *dashStub) needQuery(ctx *fasthttp.RequestCtx, names ...string) {
	for _, n := range names {
		if len(ctx.QueryArgs().Peek(n)) == 0 {
			s.mu.Lock()
			s.problems = append(s.problems, fmt.Sprintf("%s has no %s", ctx.RequestURI(), n))
			s.mu.Unlock()
		}
	}
}

// check fails the test for requests the page got wrong.
func (s *dashStub) check(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.problems {
		t.Errorf("stub API: %s", p)
	}
	if len(s.requests) == 0 {
		t.Errorf("stub API: the page made no request")
	}
}

// stubDays is the number of days from..to covers (both dates included); 1
// when they are missing or odd.
func stubDays(from, to string) int {
	f, err1 := time.Parse(time.DateOnly, from)
	l, err2 := time.Parse(time.DateOnly, to)
	if err1 != nil || err2 != nil || l.Before(f) {
		return 1
	}
	return min(30, int(l.Sub(f).Hours()/24)+1)
}

// stubTime is the time of point i of a series over days (hours for one day).
func stubTime(days, i int) string {
	now := time.Now()
	midnight := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.Local)
	if days == 1 {
		return midnight.Add(time.Duration(i) * time.Hour).Format(time.RFC3339)
	}
	return midnight.AddDate(0, 0, i-(days-1)).Format(time.DateOnly)
}

func stubLinkStats(l stubLink, days int, granularity string) map[string]any {
	clicks, uniques := stubSeries(l, days)
	var series []map[string]any
	for i := range clicks {
		series = append(series, map[string]any{"t": stubTime(days, i), "clicks": clicks[i], "unique_visitors": uniques[i]})
	}
	return map[string]any{"totals": stubTotals(l, days), "series": series, "estimated": []string{"unique_visitors"}, "granularity": granularity}
}

var stubValues = map[string][]struct {
	Value string
	Share float64
}{
	"referrer":     {{"", .34}, {"news.ycombinator.com", .21}, {"t.co", .12}, {"www.google.com", .09}, {"www.linkedin.com", .06}, {"reddit.com", .04}},
	"utm_source":   {{"", .52}, {"newsletter", .23}, {"twitter", .15}, {"mastodon", .06}},
	"utm_medium":   {{"", .52}, {"email", .23}, {"social", .21}},
	"utm_campaign": {{"", .52}, {"spring-launch", .31}, {"docs-q4", .13}},
	"device":       {{"desktop", .58}, {"mobile", .36}, {"tablet", .06}},
	"browser":      {{"Chrome", .49}, {"Safari", .27}, {"Firefox", .13}, {"Edge", .08}, {"Samsung Internet", .03}},
	"os":           {{"Windows", .31}, {"macOS", .26}, {"iOS", .21}, {"Android", .15}, {"Linux", .07}},
	"page":         {{"/", .41}, {"/pricing", .19}, {"/docs/getting-started", .15}, {"/blog/why-short-links", .11}, {"/about", .05}},
	"entry_page":   {{"/", .52}, {"/blog/why-short-links", .21}, {"/pricing", .12}, {"/docs/getting-started", .09}},
	"exit_page":    {{"/pricing", .31}, {"/", .27}, {"/docs/getting-started", .22}, {"/blog/why-short-links", .1}},
	"source":       {{"", .38}, {"Google", .27}, {"Hacker News", .14}, {"Twitter", .08}, {"DuckDuckGo", .05}},
	"channel":      {{"Direct", .38}, {"Organic Search", .32}, {"Organic Social", .22}, {"Email", .06}},
}

// stubOverview is a link's overview, made of its seeded days (index 0 is
// today, counted up to about 3 p.m.).
func stubOverview(l stubLink) map[string]any {
	day := func(k int) int { return int(math.Round(stubDaily[k] * l.Scale)) }
	sum := func(a, b int) (n int) {
		for k := a; k <= b; k++ {
			n += day(k)
		}
		return n
	}
	win := func(n int) map[string]any { return map[string]any{"clicks": n, "unique_visitors": n * 7 / 10} }
	today := day(0) * 3 / 5
	last7, prev7 := sum(1, 7), sum(8, 14)
	growth := func(now, before int) float64 { return math.Round(float64(now-before)/float64(before)*1000) / 10 }
	return map[string]any{
		"today": win(today), "yesterday": win(day(1)), "last_7_days": win(last7), "previous_7_days": win(prev7),
		"last_30_days": win(sum(1, 29)), "all_time_clicks": 3*sum(1, 29) + today,
		"daily_growth": growth(today, day(1)), "weekly_growth": growth(last7, prev7),
		"last_click": time.Now().Add(-4 * time.Second).UTC().Format(time.RFC3339),
		"peak_hour":  map[string]any{"hour": 14, "clicks": int(float64(sum(1, 29)) * 0.09)},
		"estimated":  []string{"today.unique_visitors"},
	}
}

// stubGoals are the site's goals, most converting first.
var stubGoals = map[string]any{"total_visitors": 3482, "estimated": []string{"visitors"}, "goals": []map[string]any{
	{"id": "g1", "display_name": "Signup", "goal_type": "event", "event_name": "Signup", "page_path": nil, "visitors": 412, "events": 455, "conversion_rate": 11.83},
	{"id": "g2", "display_name": "Visit /pricing", "goal_type": "page", "event_name": nil, "page_path": "/pricing", "visitors": 388, "events": 604, "conversion_rate": 11.14},
	{"id": "g3", "display_name": "Download", "goal_type": "event", "event_name": "Download", "page_path": nil, "visitors": 97, "events": 131, "conversion_rate": 2.79},
	{"id": "g4", "display_name": "Visit /docs/**", "goal_type": "page", "event_name": nil, "page_path": "/docs/**", "visitors": 0, "events": 0, "conversion_rate": 0.0},
}}

// stubHeatmap is a working-week pattern: busy weekday afternoons.
func stubHeatmap() map[string]any {
	var pv, visits [7][24]int
	for d := range 7 {
		for h := range 24 {
			v := 4 + 60*math.Exp(-math.Pow(float64(h)-14, 2)/10)
			if d >= 5 {
				v *= 0.45
			}
			pv[d][h] = int(math.Round(v))
			visits[d][h] = int(math.Round(v * 0.6))
		}
	}
	return map[string]any{"pageviews": pv, "visits": visits, "clipped": false, "hours_from": time.Now().AddDate(0, 0, -30).Format(time.RFC3339)}
}

// stubBreakdown answers a breakdown whose primary count is total: a link's
// clicks, or (kind "site") a site's pageviews for pages and visits for
// the rest, as the real API ranks them.
func stubBreakdown(dim string, total int, kind string) map[string]any {
	var results []map[string]any
	used := 0
	add := func(value string, share float64) {
		n := int(math.Round(float64(total) * share))
		used += n
		row := map[string]any{"value": value, "share": float64(n) / float64(max(total, 1))}
		if kind == "site" {
			row["visitors"], row["visits"], row["pageviews"] = n*4/5, n, n
		} else {
			row["clicks"], row["unique_visitors"] = n, n*3/4
		}
		results = append(results, row)
	}
	if dim == "country" {
		for _, c := range stubCountries {
			add(c.Code, c.Share)
		}
	} else {
		for _, v := range stubValues[dim] {
			add(v.Value, v.Share)
		}
	}
	return map[string]any{"dimension": dim, "total": total, "results": results, "other": max(0, total-used)}
}

func stubRealtime() map[string]any {
	now := time.Now()
	recent := []map[string]any{}
	for i, r := range []struct{ country, device, referrer string }{
		{"DE", "desktop", "news.ycombinator.com"}, {"US", "mobile", "t.co"}, {"GB", "desktop", ""},
		{"JP", "mobile", "www.google.com"}, {"FR", "tablet", ""}, {"NL", "desktop", "www.linkedin.com"},
	} {
		recent = append(recent, map[string]any{"time": now.Add(-time.Duration(4+i*37) * time.Second).UTC().Format(time.RFC3339),
			"country": r.country, "device": r.device, "referrer": r.referrer})
	}
	return map[string]any{"last_minute": 2, "last_5_minutes": 9, "last_hour": 74, "recent": recent}
}

func stubJSON(ctx *fasthttp.RequestCtx, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		ctx.Error(err.Error(), 500)
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

func stubProblem(ctx *fasthttp.RequestCtx, status int, typ, detail string) {
	b, _ := json.Marshal(map[string]any{"type": "/problems/" + typ, "title": strings.ReplaceAll(typ, "-", " "), "status": status, "detail": detail})
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/problem+json")
	ctx.SetBody(b)
}
