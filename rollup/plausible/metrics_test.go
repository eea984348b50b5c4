package plausible

import (
	"fmt"
	"testing"
)

// The day queried by "day": 2024-07-10 in Tallinn, 2024-07-09T21:00:00Z to
// 2024-07-10T20:59:59Z.

func TestAggregateMetrics(t *testing.T) {
	events := []Event{
		// Visitor 1: two pageviews and a signup, 120 s, not a bounce.
		pv(1, "2024-07-10T08:00:00Z", "/"),
		pv(1, "2024-07-10T08:00:40Z", "/a"),
		custom(1, "2024-07-10T08:02:00Z", "Signup"),
		// Visitor 2: one pageview, a bounce of 0 s.
		pv(2, "2024-07-10T09:00:00Z", "/"),
		// Visitor 3: a pageview and a non-interactive event 30 s later:
		// still a bounce.
		pv(3, "2024-07-10T10:00:00Z", "/b"),
		with(custom(3, "2024-07-10T10:00:30Z", "Download"), func(e *Event) { e.Interactive = false }),
		// Visitor 4: a pageview and an interactive event 300 s later.
		pv(4, "2024-07-10T11:00:00Z", "/"),
		custom(4, "2024-07-10T11:05:00Z", "Play"),
	}
	res := run(t, testSite(), `{"site_id":"example.com","metrics":["visitors","visits","pageviews","views_per_visit","bounce_rate","visit_duration","events"],"date_range":"day"}`, events...)
	// visitors 4, visits 4, pageviews 2+1+1+1 = 5, views_per_visit
	// 5/4 = 1.25, bounce_rate 2/4*100 = 50, visit_duration
	// (120+0+30+300)/4 = 112.5 -> 112 (half to even), events 3+1+2+2 = 8.
	checkResults(t, res, `[{"dimensions":[],"metrics":[4,4,5,1.25,50,112,8]}]`)
}

func TestAggregateWithNoData(t *testing.T) {
	site := testSite()
	site.Goals = []Goal{{EventName: "Signup"}}
	// Nobody signed up: one row of zeros, percentage null (its total is 0),
	// views_per_visit and conversion_rate 0.0.
	res := run(t, site, `{"site_id":"example.com","metrics":["visitors","visits","pageviews","views_per_visit","bounce_rate","visit_duration","events","percentage","conversion_rate"],"date_range":"day","filters":[["is","event:goal",["Signup"]]]}`,
		pv(1, "2024-07-10T08:00:00Z", "/"))
	checkResults(t, res, `[{"dimensions":[],"metrics":[0,0,0,0.0,0,0,0,null,0.0]}]`)
	// No engagement on the page: null.
	res = run(t, site, `{"site_id":"example.com","metrics":["time_on_page","scroll_depth","visitors"],"date_range":"day","filters":[["is","event:page",["/none"]]]}`,
		pv(1, "2024-07-10T08:00:00Z", "/"))
	checkResults(t, res, `[{"dimensions":[],"metrics":[null,null,0]}]`)
	// No events at all.
	res = run(t, site, `{"site_id":"example.com","metrics":["visitors","bounce_rate","views_per_visit"],"date_range":"day"}`)
	checkResults(t, res, `[{"dimensions":[],"metrics":[0,0,0.0]}]`)
}

func TestRoundingHalfToEven(t *testing.T) {
	var events []Event
	// 8 visits, 1 bounce: 1/8*100 = 12.5 -> 12.
	for i := uint64(1); i <= 8; i++ {
		at := fmt.Sprintf("2024-07-10T%02d:00:00Z", i)
		events = append(events, pv(i, at, "/"))
		if i > 1 {
			events = append(events, pv(i, fmt.Sprintf("2024-07-10T%02d:00:01Z", i), "/x"))
		}
	}
	res := run(t, testSite(), `{"site_id":"example.com","metrics":["bounce_rate","visit_duration","views_per_visit"],"date_range":"day"}`, events...)
	// visit_duration 7*1/8 = 0.875 -> 1; views_per_visit 15/8 = 1.875 ->
	// 187.5 -> 188 -> 1.88.
	checkResults(t, res, `[{"dimensions":[],"metrics":[12,1,1.88]}]`)

	// 3 bounces of 8: 37.5 -> 38.
	events = events[:0]
	for i := uint64(1); i <= 8; i++ {
		events = append(events, pv(i, fmt.Sprintf("2024-07-10T%02d:00:00Z", i), "/"))
		if i > 3 {
			events = append(events, pv(i, fmt.Sprintf("2024-07-10T%02d:00:02Z", i), "/x"))
		}
	}
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["bounce_rate","visit_duration"],"date_range":"day"}`, events...)
	// visit_duration 5*2/8 = 1.25 -> 1.
	checkResults(t, res, `[{"dimensions":[],"metrics":[38,1]}]`)

	// views_per_visit 5 pageviews over 3 visits: 1.666... -> 1.67.
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["views_per_visit"],"date_range":"day"}`,
		pv(1, "2024-07-10T08:00:00Z", "/"), pv(1, "2024-07-10T08:01:00Z", "/"), pv(1, "2024-07-10T08:02:00Z", "/"),
		pv(2, "2024-07-10T08:00:00Z", "/"), pv(3, "2024-07-10T08:00:00Z", "/"))
	checkResults(t, res, `[{"dimensions":[],"metrics":[1.67]}]`)
}

func TestTimeOnPage(t *testing.T) {
	res := run(t, testSite(), `{"site_id":"example.com","metrics":["time_on_page","visitors"],"date_range":"day","dimensions":["event:page"]}`,
		// /blog: visit A engaged 120 s + 20 s, visit B 60 s:
		// (140+60)/2 = 100.
		pv(1, "2024-07-10T08:00:00Z", "/blog"),
		engage(1, "2024-07-10T08:02:00Z", "/blog", 120000, 10),
		engage(1, "2024-07-10T08:03:00Z", "/blog", 20000, 10),
		pv(2, "2024-07-10T09:00:00Z", "/blog"),
		engage(2, "2024-07-10T09:01:00Z", "/blog", 60000, 10),
		// /a: two visits engaged 2 s and 3 s: 5/2 = 2.5 -> 2.
		pv(3, "2024-07-10T10:00:00Z", "/a"),
		engage(3, "2024-07-10T10:00:02Z", "/a", 2000, 10),
		pv(4, "2024-07-10T10:00:00Z", "/a"),
		engage(4, "2024-07-10T10:00:03Z", "/a", 3000, 10),
		// /c: viewed, never engaged: null.
		pv(5, "2024-07-10T11:00:00Z", "/c"),
	)
	// Ordered by time_on_page desc, nulls last.
	checkResults(t, res, `[{"dimensions":["/blog"],"metrics":[100,2]},{"dimensions":["/a"],"metrics":[2,2]},{"dimensions":["/c"],"metrics":[null,1]}]`)
}

func TestScrollDepth(t *testing.T) {
	res := run(t, testSite(), `{"site_id":"example.com","metrics":["scroll_depth"],"date_range":"day","dimensions":["event:page"]}`,
		// /blog: visit A max(20, 40) = 40, visit B 80: (40+80)/2 = 60; a
		// missing depth (255) is left out.
		pv(1, "2024-07-10T08:00:00Z", "/blog"),
		engage(1, "2024-07-10T08:01:00Z", "/blog", 1000, 20),
		engage(1, "2024-07-10T08:02:00Z", "/blog", 1000, 40),
		engage(1, "2024-07-10T08:03:00Z", "/blog", 1000, ScrollDepthMissing),
		pv(2, "2024-07-10T09:00:00Z", "/blog"),
		engage(2, "2024-07-10T09:01:00Z", "/blog", 1000, 80),
		// /a: 32 and 33: 32.5 -> 32.
		pv(3, "2024-07-10T10:00:00Z", "/a"),
		engage(3, "2024-07-10T10:01:00Z", "/a", 0, 32),
		pv(4, "2024-07-10T10:00:00Z", "/a"),
		engage(4, "2024-07-10T10:01:00Z", "/a", 0, 33),
		// /m: only a missing depth: null.
		pv(5, "2024-07-10T11:00:00Z", "/m"),
		engage(5, "2024-07-10T11:01:00Z", "/m", 0, ScrollDepthMissing),
	)
	checkResults(t, res, `[{"dimensions":["/blog"],"metrics":[60]},{"dimensions":["/a"],"metrics":[32]},{"dimensions":["/m"],"metrics":[null]}]`)

	// With a top-level page filter and no dimension: visit 1's max on /blog.
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["scroll_depth","time_on_page"],"date_range":"day","filters":[["is","event:page",["/blog"]]]}`,
		pv(1, "2024-07-10T08:00:00Z", "/blog"),
		engage(1, "2024-07-10T08:01:00Z", "/blog", 1500, 20),
		engage(1, "2024-07-10T08:02:00Z", "/blog", 1000, 45),
		pv(1, "2024-07-10T08:03:00Z", "/other"),
		engage(1, "2024-07-10T08:04:00Z", "/other", 9000, 100),
	)
	// scroll_depth 45; time_on_page (1.5+1.0)/1 = 2.5 -> 2.
	checkResults(t, res, `[{"dimensions":[],"metrics":[45,2]}]`)
}

func TestEventsExcludeEngagement(t *testing.T) {
	res := run(t, testSite(), `{"site_id":"example.com","metrics":["events","pageviews","visitors","visits"],"date_range":"day"}`,
		pv(1, "2024-07-10T08:00:00Z", "/"),
		engage(1, "2024-07-10T08:00:05Z", "/", 5000, 50),
		custom(1, "2024-07-10T08:00:06Z", "Signup"),
		// An engagement with no visit alive is dropped, as Plausible's
		// ingest drops it: visitor 2 does not count.
		engage(2, "2024-07-10T09:00:00Z", "/", 5000, 50),
	)
	// events: pageview + custom = 2 (engagement excluded).
	checkResults(t, res, `[{"dimensions":[],"metrics":[2,1,1,1]}]`)
}

func TestEngagementDoesNotChangeBounceOrDuration(t *testing.T) {
	res := run(t, testSite(), `{"site_id":"example.com","metrics":["bounce_rate","visit_duration"],"date_range":"day"}`,
		pv(1, "2024-07-10T08:00:00Z", "/"),
		engage(1, "2024-07-10T08:00:03Z", "/", 3000, 50),
	)
	// Still one pageview and no custom event: bounce 100; duration counts
	// only non-engagement events: 0.
	checkResults(t, res, `[{"dimensions":[],"metrics":[100,0]}]`)
}

func TestPercentage(t *testing.T) {
	ff := func(e Event) Event { return with(e, func(e *Event) { e.Browser = "Firefox" }) }
	ch := func(e Event) Event { return with(e, func(e *Event) { e.Browser = "Chrome" }) }
	events := []Event{
		ff(pv(1, "2024-07-10T08:00:00Z", "/")),
		ch(pv(2, "2024-07-10T08:00:00Z", "/")),
		ch(pv(3, "2024-07-10T08:00:00Z", "/")),
	}
	res := run(t, testSite(), `{"site_id":"example.com","metrics":["visitors","percentage"],"date_range":"day","dimensions":["visit:browser"]}`, events...)
	// 2/3*100 = 66.666... -> 66.67; 1/3*100 -> 33.33.
	checkResults(t, res, `[{"dimensions":["Chrome"],"metrics":[2,66.67]},{"dimensions":["Firefox"],"metrics":[1,33.33]}]`)

	// Without dimensions it is 100.0, and percentage alone adds visitors
	// only internally.
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["percentage"],"date_range":"day"}`, events...)
	checkResults(t, res, `[{"dimensions":[],"metrics":[100.0]}]`)
}
