package rollup

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
)

// TestRawQueryMatchesReference: filters on two dimensions, and a
// breakdown filtered on another dimension, are answered exactly from the
// raw events: the reference over the narrowed world, visitors exact.
func TestRawQueryMatchesReference(t *testing.T) {
	w := generate(7)
	a, _ := feedWorld(t, w)
	filters := []query.DimFilter{{Dimension: "country", Op: "is", Values: []string{"DE"}}, {Dimension: "device", Op: "is_not", Values: []string{"tablet"}}}
	narrow := w.Only(func(ev *ingest.Event) bool { return ev.Country == "DE" && ev.Device != "tablet" })
	byCountry := w.Only(func(ev *ingest.Event) bool { return ev.Country == "DE" })
	for i, r := range worldRanges(t) {
		ref := narrow.RefSite(r.From, r.To)
		got, err := a.SiteAggregate(genSite, r, filters)
		if err != nil {
			t.Fatalf("SiteAggregate: %v", err)
		}
		want := ref.Metrics()
		want.Visitors = uint64(ref.Visitors)
		// The raw engine answers as Plausible's API does: no bot counts,
		// and time on page and scroll depth only with a page filter.
		want.BotEvents, want.TimeOnPage, want.ScrollDepth = 0, 0, 0
		if want.Visits == 0 {
			t.Fatalf("range %d: the narrowed world is empty", i)
		}
		if got != want {
			t.Errorf("range %d, two filters:\n got %+v\nwant %+v", i, got, want)
		}

		pref := byCountry.RefSite(r.From, r.To)
		bd, err := a.SiteBreakdown(genSite, "page", r, 100, filters[:1])
		if err != nil {
			t.Fatalf("SiteBreakdown: %v", err)
		}
		wantEqual(t, "raw breakdown", bd.FromRawEvents, true)
		wantEqual(t, "pages", len(bd.Results), len(pref.PagePV))
		var total int64
		for _, row := range bd.Results {
			wantEqual(t, "pageviews of "+row.Value, row.Pageviews, pref.PagePV[row.Value])
			wantEqual(t, "visitors of "+row.Value, row.Visitors, uint64(len(pref.PageVisitors[row.Value])))
			total += row.Pageviews
		}
		wantEqual(t, "breakdown total", bd.Total, pref.Pageviews)
		wantEqual(t, "breakdown total is the rows", total, bd.Total)

		pts, err := a.SiteTimeseries(genSite, r, query.Day, filters)
		if err != nil {
			t.Fatalf("SiteTimeseries: %v", err)
		}
		// With event metrics in the query, Plausible counts a day's visits
		// from its events: the visits with an event that day (a visit
		// across midnight counts on both days), which is the reference's
		// count of the visits overlapping the day.
		for _, p := range pts {
			end := minTime(nextDay(p.T, r), r.To)
			wantEqual(t, "visits on "+p.T.String(), p.Visits, narrow.RefSite(p.T, end).Visits)
		}
	}
	// One dimension still comes from the rollups and agrees with the raw
	// answer (a breakdown by country filtered on country and device).
	r := worldRanges(t)[0]
	bd, err := a.SiteBreakdown(genSite, "country", r, 10, filters)
	if err != nil {
		t.Fatalf("SiteBreakdown(country): %v", err)
	}
	if len(bd.Results) != 1 || bd.Results[0].Value != "DE" {
		t.Fatalf("country breakdown: got %+v; want DE only", bd.Results)
	}
	wantEqual(t, "DE visits", bd.Results[0].Visits, narrow.RefSite(r.From, r.To).Visits)
}

func TestRawQueryRefusals(t *testing.T) {
	a := openTest(t, testConfig(t, t.TempDir(), &testClock{now: base}))
	r := query.Range{From: base.Add(-time.Hour), To: base}
	for _, fs := range [][]query.DimFilter{
		{{Dimension: "country", Op: "is", Values: []string{"DE"}}, {Dimension: "nope", Op: "is", Values: []string{"x"}}},
		{{Dimension: "country", Op: "is", Values: []string{"DE"}}, {Dimension: "device", Op: "matches", Values: []string{"x"}}},
	} {
		if _, err := a.SiteAggregate(genSite, r, fs); !errors.Is(err, query.ErrUnsupportedQuery) {
			t.Errorf("filters %+v: got %v; want ErrUnsupportedQuery", fs, err)
		}
	}
}

// TestRawQueryV2HTTP: a Plausible v2 query with two filters answers 200,
// exact numbers, and says they came from raw events.
func TestRawQueryV2HTTP(t *testing.T) {
	w := generate(8)
	a, _ := feedWorld(t, w)
	url := startStats(t, a)
	st, _, body := call(t, "POST", url+"/api/v2/query", "key-a",
		`{"site_id":"ny.example","metrics":["visitors","visits","bounce_rate"],"date_range":["2026-11-26","2026-12-01"],`+
			`"filters":[["is","visit:country",["US"]],["is","visit:device",["Mobile","Desktop"]]]}`)
	if st != 200 {
		t.Fatalf("v2 with two filters: got %d %s; want 200", st, body)
	}
	var v2 struct {
		Results []struct{ Metrics []float64 }
		Meta    map[string]any
	}
	if err := json.Unmarshal(body, &v2); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	ny := mustLoc(t, genTZ)
	ref := w.Only(func(ev *ingest.Event) bool {
		return ev.Country == "US" && (ev.Device == "mobile" || ev.Device == "desktop")
	}).RefSite(time.Date(2026, 11, 26, 0, 0, 0, 0, ny), time.Date(2026, 12, 2, 0, 0, 0, 0, ny))
	if len(v2.Results) != 1 || ref.Visits == 0 {
		t.Fatalf("results: got %s; want one row (reference visits %d)", body, ref.Visits)
	}
	m := v2.Results[0].Metrics
	wantEqual(t, "visitors", int64(m[0]), ref.Visitors)
	wantEqual(t, "visits", int64(m[1]), ref.Visits)
	wantEqual(t, "bounce_rate", m[2], ref.Metrics().BounceRate)
	if !strings.Contains(string(body), `"estimated_metrics":[]`) {
		t.Errorf("raw answer marks an estimate: %s", body)
	}
	// A breakdown by page filtered on country, over v1.
	st, _, body = call(t, "GET", url+"/v1/sites/"+genSite+"/stats/breakdown?dimension=page&filters=country==US&from=2026-11-26&to=2026-12-01", "key-a", "")
	if st != 200 || !strings.Contains(string(body), `"from_raw_events":true`) {
		t.Errorf("v1 breakdown filtered on another dimension: got %d %s; want 200 from raw events", st, body)
	}
}
