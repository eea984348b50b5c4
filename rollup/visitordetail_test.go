package rollup

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
)

// visitorDetailWorld: four visitors of ny.example on 2026-11-29 (New York):
//
//	A  US-CA, city 5391959, Chrome 120.0, Windows: visit 1 at 10:00, two
//	   pageviews (no bounce); visit 2 at 14:00, one pageview (bounce)
//	B  US-CA, city 5391959, Chrome 121.0, Android 14.0: one pageview (bounce)
//	C  DE-BE, city 2950159, Firefox 128.0, Linux: three pageviews; the
//	   second from DE-BY, city 2867714 (an address change within the
//	   visit: the visit keeps its first event's values)
//	D  no place, Safari without a version: one pageview (bounce)
func visitorDetailWorld(t *testing.T) []ingest.Event {
	t.Helper()
	ny := mustLoc(t, genTZ)
	at := func(h, m int) time.Time { return time.Date(2026, 11, 29, h, m, 0, 0, ny) }
	type who struct {
		hash                                        uint64
		country, region, city, browser, bv, os, osv string
	}
	a := who{1, "US", "US-CA", "5391959", "Chrome", "120.0", "Windows", ""}
	b := who{2, "US", "US-CA", "5391959", "Chrome", "121.0", "Android", "14.0"}
	c := who{3, "DE", "DE-BE", "2950159", "Firefox", "128.0", "Linux", ""}
	cMoved := c
	cMoved.region, cMoved.city = "DE-BY", "2867714"
	d := who{4, "", "", "", "Safari", "", "iOS", ""}
	n := 0
	ev := func(w who, t time.Time, path string) ingest.Event {
		n++
		e := pageview("detail", n, genSite, t, false)
		e.VisitorHash, e.Path = w.hash, path
		e.Country, e.Subdivision, e.City = w.country, w.region, w.city
		e.Browser, e.BrowserVersion, e.OS, e.OSVersion = w.browser, w.bv, w.os, w.osv
		e.Device = "desktop"
		return e
	}
	return []ingest.Event{
		ev(a, at(10, 0), "/"), ev(a, at(10, 1), "/pricing"),
		ev(a, at(14, 0), "/"),
		ev(b, at(11, 0), "/"),
		ev(c, at(12, 0), "/"), ev(cMoved, at(12, 2), "/docs"), ev(c, at(12, 5), "/signup"),
		ev(d, at(13, 0), "/"),
	}
}

// TestVisitorDetailV2: visit:region, visit:city, visit:browser_version and
// visit:os_version through /api/v2/query, from the rollups (no filter) and
// from the raw events (a filter that keeps everything), against the
// scenario's numbers worked out by hand from Plausible's definitions:
// visit dimensions are the visit's first event's, an unknown region is ""
// and an unknown city 0 (city_geoname_id is an integer), unknown versions
// are "(not set)", bounce_rate an integer percentage.
func TestVisitorDetailV2(t *testing.T) {
	a := openTest(t, testConfig(t, t.TempDir(), &testClock{now: base}))
	srv := startServer(t, a)
	srv.ship(t, segmentBytes("edge-1", 1, visitorDetailWorld(t)...))
	url := startStats(t, a)

	type row struct{ visitors, visits, pageviews, bounceRate int64 }
	cases := []struct {
		dim  string
		want map[string]row // by the dimension value's JSON
	}{
		{"visit:region", map[string]row{
			`"US-CA"`: {2, 3, 4, 67}, // A's two visits and B's; bounces A2, B: 2/3
			`"DE-BE"`: {1, 1, 3, 0},  // C, not DE-BY
			`""`:      {1, 1, 1, 100},
		}},
		{"visit:city", map[string]row{
			`5391959`: {2, 3, 4, 67},
			`2950159`: {1, 1, 3, 0},
			`0`:       {1, 1, 1, 100},
		}},
		{"visit:browser_version", map[string]row{
			`"120.0"`:     {1, 2, 3, 50},
			`"121.0"`:     {1, 1, 1, 100},
			`"128.0"`:     {1, 1, 3, 0},
			`"(not set)"`: {1, 1, 1, 100},
		}},
		{"visit:os_version", map[string]row{
			`"14.0"`:      {1, 1, 1, 100},
			`"(not set)"`: {3, 4, 7, 50}, // A (2 visits), C, D: bounces A2, D
		}},
	}
	for _, c := range cases {
		for _, filter := range []string{"", `,"filters":[["is_not","visit:country",["JP"]]]`} {
			what := c.dim
			if filter != "" {
				what += " (raw events)"
			}
			st, _, body := call(t, "POST", url+"/api/v2/query", "key-a", fmt.Sprintf(
				`{"site_id":"ny.example","metrics":["visitors","visits","pageviews","bounce_rate"],`+
					`"date_range":["2026-11-29","2026-11-29"],"dimensions":[%q]%s}`, c.dim, filter))
			if st != 200 {
				t.Fatalf("%s: got %d %s", what, st, body)
			}
			var res struct {
				Results []struct {
					Metrics    []int64
					Dimensions []json.RawMessage
				}
			}
			if err := json.Unmarshal(body, &res); err != nil {
				t.Fatalf("%s: decode %s: %v", what, body, err)
			}
			got := map[string]row{}
			for _, r := range res.Results {
				m := r.Metrics
				got[string(r.Dimensions[0])] = row{m[0], m[1], m[2], m[3]}
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("%s:\n got %v\nwant %v\n(%s)", what, got, c.want, body)
			}
		}
	}

	// Filters on the new dimensions (raw events), city by its integer id.
	for _, c := range []struct {
		filter string
		want   [3]int64 // visitors, visits, pageviews
	}{
		{`["is","visit:city",[5391959]]`, [3]int64{2, 3, 4}},
		{`["is","visit:region",["DE-BE"]]`, [3]int64{1, 1, 3}},
		{`["is","visit:region",["DE-BY"]]`, [3]int64{0, 0, 0}},
		{`["is","visit:browser_version",["(not set)"]]`, [3]int64{1, 1, 1}},
		{`["contains","visit:browser_version",["12"]]`, [3]int64{3, 4, 7}},
		{`["is_not","visit:os_version",["(not set)"]]`, [3]int64{1, 1, 1}},
	} {
		st, _, body := call(t, "POST", url+"/api/v2/query", "key-a",
			`{"site_id":"ny.example","metrics":["visitors","visits","pageviews"],"date_range":["2026-11-29","2026-11-29"],"filters":[`+c.filter+`]}`)
		if st != 200 {
			t.Fatalf("filter %s: got %d %s", c.filter, st, body)
		}
		var res struct{ Results []struct{ Metrics []int64 } }
		if err := json.Unmarshal(body, &res); err != nil || len(res.Results) != 1 {
			t.Fatalf("filter %s: %s (%v)", c.filter, body, err)
		}
		if m := res.Results[0].Metrics; [3]int64(m) != c.want {
			t.Errorf("filter %s: got %v; want %v", c.filter, m, c.want)
		}
	}

	// The native breakdown has the same dimensions, with the stored value.
	_, _, body := call(t, "GET", url+"/v1/sites/"+genSite+"/stats/breakdown?dimension=region&from=2026-11-29&to=2026-11-29", "key-a", "")
	var bd query.SiteBreakdown
	if err := json.Unmarshal(body, &bd); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	var got []string
	for _, r := range bd.Results {
		got = append(got, fmt.Sprintf("%q:%d/%d", r.Value, r.Visitors, r.Visits))
	}
	if s := strings.Join(got, " "); s != `"US-CA":2/3 "":1/1 "DE-BE":1/1` {
		t.Errorf("v1 region breakdown: got %s; want US-CA 2/3, then \"\" and DE-BE 1/1 (%s)", s, body)
	}

	// A filter on one of them with a breakdown by another is answered
	// from the raw events: San Francisco's visitors by browser version
	// (A: two visits on 120.0, B: one on 121.0), and Berlin's visit by
	// city (C's visit keeps its first event's city).
	for _, c := range []struct{ query, want string }{
		{"dimension=browser_version&filters=city==5391959", `"120.0":1/2 "121.0":1/1`},
		{"dimension=city&filters=region==DE-BE", `"2950159":1/1`},
	} {
		st, _, body := call(t, "GET", url+"/v1/sites/"+genSite+"/stats/breakdown?"+c.query+"&from=2026-11-29&to=2026-11-29", "key-a", "")
		var bd query.SiteBreakdown
		if err := json.Unmarshal(body, &bd); st != 200 || err != nil {
			t.Fatalf("%s: got %d %s (%v)", c.query, st, body, err)
		}
		var got []string
		for _, r := range bd.Results {
			got = append(got, fmt.Sprintf("%q:%d/%d", r.Value, r.Visitors, r.Visits))
		}
		if s := strings.Join(got, " "); s != c.want {
			t.Errorf("v1 breakdown %s: got %s; want %s (%s)", c.query, s, c.want, body)
		}
	}
}
