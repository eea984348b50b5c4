package plausible

import (
	"errors"
	"testing"
)

// A visit across midnight in Tallinn: 2024-07-08 23:50 to 2024-07-09 00:10
// local (20:50Z to 21:10Z), two pageviews 20 minutes apart.
var midnightVisit = []Event{
	pv(1, "2024-07-08T20:50:00Z", "/"),
	pv(1, "2024-07-08T21:10:00Z", "/x"),
}

func TestVisitAcrossMidnightCountsOnBothDays(t *testing.T) {
	for _, day := range []string{"2024-07-08", "2024-07-09"} {
		res := run(t, testSite(), `{"site_id":"example.com","metrics":["visitors","visits","bounce_rate","visit_duration"],"date_range":["`+day+`","`+day+`"]}`, midnightVisit...)
		// The whole visit on each day it was active: 1 visit, 2 pageviews
		// so no bounce, 20 min = 1200 s.
		checkResults(t, res, `[{"dimensions":[],"metrics":[1,1,0,1200]}]`)
	}
	// Pageviews are events: one on each day.
	res := run(t, testSite(), `{"site_id":"example.com","metrics":["pageviews","visitors"],"date_range":["2024-07-08","2024-07-08"]}`, midnightVisit...)
	checkResults(t, res, `[{"dimensions":[],"metrics":[1,1]}]`)
}

func TestVisitBucketedByLastEvent(t *testing.T) {
	// Over both days, by day: the visit counts once, on the day of its last
	// event; pageviews count on their own days.
	res := run(t, testSite(), `{"site_id":"example.com","metrics":["visits","visit_duration"],"date_range":["2024-07-08","2024-07-09"],"dimensions":["time:day"]}`, midnightVisit...)
	checkResults(t, res, `[{"dimensions":["2024-07-09"],"metrics":[1,1200]}]`)
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["pageviews","visits"],"date_range":["2024-07-08","2024-07-09"],"dimensions":["time:day"]}`, midnightVisit...)
	// Both from events: a visit per day it had an event.
	checkResults(t, res, `[{"dimensions":["2024-07-08"],"metrics":[1,1]},{"dimensions":["2024-07-09"],"metrics":[1,1]}]`)
	// Queried for the 8th alone, the visit's bucket is the 9th: Plausible
	// returns that row even though it is outside the range (replicated).
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["visits"],"date_range":["2024-07-08","2024-07-08"],"dimensions":["time:day"]}`, midnightVisit...)
	checkResults(t, res, `[{"dimensions":["2024-07-09"],"metrics":[1]}]`)
}

func TestEngagementKeepsVisitAlive(t *testing.T) {
	events := []Event{
		pv(1, "2024-07-10T08:00:00Z", "/"),
		// 25 minutes later an engagement refreshes the visit...
		engage(1, "2024-07-10T08:25:00Z", "/", 5000, 30),
		// ...so this pageview, 50 minutes after the first, continues it.
		pv(1, "2024-07-10T08:50:00Z", "/b"),
	}
	res := run(t, testSite(), `{"site_id":"example.com","metrics":["visits","pageviews","bounce_rate","visit_duration"],"date_range":"day"}`, events...)
	// One visit of 2 pageviews, 50 min = 3000 s.
	checkResults(t, res, `[{"dimensions":[],"metrics":[1,2,0,3000]}]`)

	// Without the engagement the pause is over 30 minutes: two bounces.
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["visits","pageviews","bounce_rate","visit_duration"],"date_range":"day"}`, events[0], events[2])
	checkResults(t, res, `[{"dimensions":[],"metrics":[2,2,100,0]}]`)

	// Exactly 30 minutes continues the visit; 30 minutes and 1 second does
	// not.
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["visits"],"date_range":"day"}`,
		pv(1, "2024-07-10T08:00:00Z", "/"), pv(1, "2024-07-10T08:30:00Z", "/"),
		pv(2, "2024-07-10T08:00:00Z", "/"), pv(2, "2024-07-10T08:30:01Z", "/"))
	checkResults(t, res, `[{"dimensions":[],"metrics":[3]}]`)
}

func TestNonInteractiveEventKeepsBounce(t *testing.T) {
	res := run(t, testSite(), `{"site_id":"example.com","metrics":["bounce_rate","events"],"date_range":"day"}`,
		pv(1, "2024-07-10T08:00:00Z", "/"),
		with(custom(1, "2024-07-10T08:00:10Z", "Scroll"), func(e *Event) { e.Interactive = false }),
	)
	checkResults(t, res, `[{"dimensions":[],"metrics":[100,2]}]`)
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["bounce_rate"],"date_range":"day"}`,
		pv(1, "2024-07-10T08:00:00Z", "/"),
		custom(1, "2024-07-10T08:00:10Z", "Click"),
	)
	checkResults(t, res, `[{"dimensions":[],"metrics":[0]}]`)
}

func TestVisitStartingWithCustomEvent(t *testing.T) {
	res := run(t, testSite(), `{"site_id":"example.com","metrics":["visits","bounce_rate"],"date_range":"day","dimensions":["visit:entry_page"]}`,
		// Starts interactive: not a bounce; the entry page is the first
		// pageview's.
		custom(1, "2024-07-10T08:00:00Z", "Open"),
		pv(1, "2024-07-10T08:00:05Z", "/later"),
		// Starts non-interactive and never views a page: a bounce with an
		// empty entry page, shown as "".
		with(custom(2, "2024-07-10T09:00:00Z", "Ping"), func(e *Event) { e.Interactive = false }),
	)
	checkResults(t, res, `[{"dimensions":[""],"metrics":[1,100]},{"dimensions":["/later"],"metrics":[1,0]}]`)
}

func TestEntryAndExitPages(t *testing.T) {
	events := []Event{
		pv(1, "2024-07-10T08:00:00Z", "/a"),
		pv(1, "2024-07-10T08:01:00Z", "/b"),
		custom(1, "2024-07-10T08:02:00Z", "Signup"), // does not move the exit page
		pv(2, "2024-07-10T09:00:00Z", "/b"),
		pv(3, "2024-07-10T10:00:00Z", "/b"),
		pv(3, "2024-07-10T10:01:00Z", "/a"),
	}
	res := run(t, testSite(), `{"site_id":"example.com","metrics":["visitors","visits"],"date_range":"day","dimensions":["visit:exit_page"]}`, events...)
	// Exits: visit 1 on /b, 2 on /b, 3 on /a; an earlier exit is not kept.
	checkResults(t, res, `[{"dimensions":["/b"],"metrics":[2,2]},{"dimensions":["/a"],"metrics":[1,1]}]`)
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["visitors","visit_duration"],"date_range":"day","dimensions":["visit:entry_page"]}`, events...)
	// Entries: /b for visits 2 (0 s) and 3 (60 s), /a for visit 1 (120 s).
	checkResults(t, res, `[{"dimensions":["/b"],"metrics":[2,30]},{"dimensions":["/a"],"metrics":[1,120]}]`)
}

func TestPageWithSessionMetricsUsesEntryPage(t *testing.T) {
	events := []Event{
		pv(1, "2024-07-10T08:00:00Z", "/a"), pv(1, "2024-07-10T08:01:00Z", "/b"), // entry /a, 60 s
		pv(2, "2024-07-10T09:00:00Z", "/b"),                                      // entry /b, bounce
		pv(3, "2024-07-10T10:00:00Z", "/b"), pv(3, "2024-07-10T10:02:00Z", "/a"), // entry /b, 120 s
	}
	res := run(t, testSite(), `{"site_id":"example.com","metrics":["visitors","visits","pageviews","bounce_rate","visit_duration"],"date_range":"day","dimensions":["event:page"]}`, events...)
	// visitors/visits/pageviews: activity on the page; bounce_rate and
	// visit_duration: visits that entered there. /b: 3 visitors, 3
	// pageviews; entered by visits 2 and 3: 1/2 bounces = 50, (0+120)/2 =
	// 60. /a: 2 visitors; entered by visit 1: 0, 60.
	checkResults(t, res, `[{"dimensions":["/b"],"metrics":[3,3,3,50,60]},{"dimensions":["/a"],"metrics":[2,2,2,0,60]}]`)

	// A page filter with session metrics: the visits that viewed /a (1 and
	// 3); bounce_rate only over those that entered on /a (visit 1).
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["visitors","bounce_rate","visit_duration"],"date_range":"day","filters":[["is","event:page",["/a"]]]}`, events...)
	// duration (60+120)/2 = 90.
	checkResults(t, res, `[{"dimensions":[],"metrics":[2,0,90]}]`)
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["visitors","bounce_rate","visit_duration"],"date_range":"day","filters":[["is","event:page",["/b"]]]}`, events...)
	// All three viewed /b; entered there: 2 and 3, one bounce: 50;
	// duration (60+0+120)/3 = 60.
	checkResults(t, res, `[{"dimensions":[],"metrics":[3,50,60]}]`)

	// A page nobody entered on has bounce_rate 0 (the left join's default).
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["pageviews","bounce_rate"],"date_range":"day","dimensions":["event:page"],"filters":[["is","event:page",["/a"]]]}`,
		pv(1, "2024-07-10T08:00:00Z", "/b"), pv(1, "2024-07-10T08:01:00Z", "/a"))
	checkResults(t, res, `[{"dimensions":["/a"],"metrics":[1,0]}]`)
}

func TestEventsTableCountsEngagementVisitors(t *testing.T) {
	// A visit of 2024-07-09 23:50 local with an engagement at 00:05 on the
	// 10th.
	events := []Event{
		pv(1, "2024-07-09T20:50:00Z", "/"),
		engage(1, "2024-07-09T21:05:00Z", "/", 4000, 10),
	}
	// With an event metric the events table answers: the engagement
	// counts its visitor on the 10th (replicated).
	res := run(t, testSite(), `{"site_id":"example.com","metrics":["visitors","pageviews"],"date_range":"day"}`, events...)
	checkResults(t, res, `[{"dimensions":[],"metrics":[1,0]}]`)
	// visitors alone comes from visits, whose last event is on the 9th.
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["visitors"],"date_range":"day"}`, events...)
	checkResults(t, res, `[{"dimensions":[],"metrics":[0]}]`)
}

func TestHourlyVisitorsAreSmeared(t *testing.T) {
	events := []Event{
		// 13:50 to 15:10 local: active in hours 13, 14 and 15.
		pv(1, "2024-07-10T10:50:00Z", "/"),
		pv(1, "2024-07-10T11:20:00Z", "/"),
		pv(1, "2024-07-10T11:50:00Z", "/"),
		pv(1, "2024-07-10T12:10:00Z", "/"),
		pv(2, "2024-07-10T11:30:00Z", "/"),
	}
	res := run(t, testSite(), `{"site_id":"example.com","metrics":["visitors","visits","visit_duration"],"date_range":"day","dimensions":["time:hour"]}`, events...)
	// visitors/visits from 15-minute slots 10:45..12:00 UTC (hours 13, 14,
	// 15 local) plus visit 2 in hour 14; visit_duration by the hour of the
	// last event: visit 2 (0 s) in 14, visit 1 (4800 s) in 15; hour 13 has
	// no visit ending in it: 0.
	checkResults(t, res, `[{"dimensions":["2024-07-10 13:00:00"],"metrics":[1,1,0]},{"dimensions":["2024-07-10 14:00:00"],"metrics":[2,2,0]},{"dimensions":["2024-07-10 15:00:00"],"metrics":[1,1,4800]}]`)

	// With pageviews the events table answers visitors and visits: per
	// hour with events.
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["visits","pageviews","visit_duration"],"date_range":"day","dimensions":["time:hour"]}`, events...)
	// hour 13: visit 1 (1 pageview); 14: visits 1 and 2 (3 pageviews); 15:
	// visit 1 (1 pageview), duration 4800.
	checkResults(t, res, `[{"dimensions":["2024-07-10 13:00:00"],"metrics":[1,1,0]},{"dimensions":["2024-07-10 14:00:00"],"metrics":[2,3,0]},{"dimensions":["2024-07-10 15:00:00"],"metrics":[1,1,4800]}]`)
}

func TestQuarterHourTimezoneHours(t *testing.T) {
	site := Site{ID: "s", Domain: "example.com", Timezone: "Asia/Kathmandu"} // +05:45
	res := run(t, site, `{"site_id":"example.com","metrics":["visits"],"date_range":["2024-07-10","2024-07-10"],"dimensions":["time:hour"]}`,
		pv(1, "2024-07-10T05:00:00Z", "/"), // 10:45 local
		pv(1, "2024-07-10T05:15:00Z", "/"), // 11:00
		pv(1, "2024-07-10T05:30:00Z", "/"),
		pv(1, "2024-07-10T05:45:00Z", "/"),
		pv(1, "2024-07-10T06:00:00Z", "/"),
		pv(1, "2024-07-10T06:15:00Z", "/"), // 12:00
		pv(1, "2024-07-10T06:30:00Z", "/"),
	)
	// One visit 05:00-06:30 UTC, slots every 15 minutes: 10:45 -> hour 10,
	// 11:00..11:45 -> 11, 12:00 and 12:15 -> 12.
	checkResults(t, res, `[{"dimensions":["2024-07-10 10:00:00"],"metrics":[1]},{"dimensions":["2024-07-10 11:00:00"],"metrics":[1]},{"dimensions":["2024-07-10 12:00:00"],"metrics":[1]}]`)
}

func TestScanWidensOnlyForVisitsAtTheEdge(t *testing.T) {
	// A visit from 2024-07-09 20:00 local (17:00Z) kept alive every 20
	// minutes until 00:30 on the 10th: it started 4 hours before the day.
	var events []Event
	for m := 0; m <= 270; m += 20 {
		events = append(events, pv(1, mustTime("2024-07-09T17:00:00Z").Add(timeMinutes(m)).Format("2006-01-02T15:04:05Z"), "/"))
	}
	// An unrelated visitor 5 hours before the day.
	events = append(events, pv(2, "2024-07-09T16:00:00Z", "/"))
	src := &sliceSource{events: events}
	q, err := Parse([]byte(`{"site_id":"example.com","metrics":["visits","visit_duration"],"date_range":"day"}`), testSite(), now)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Evaluate(q, src, Config{})
	if err != nil {
		t.Fatal(err)
	}
	// The whole visit: 17:00Z to 21:20Z (the last pageview at minute 260),
	// 15600 s.
	checkResults(t, res, `[{"dimensions":[],"metrics":[1,15600]}]`)
	if len(src.scans) < 2 {
		t.Errorf("scans %v: want the window widened", src.scans)
	}

	// A visit running for more than 7 days before the range is left out,
	// as Plausible leaves it out; its events in the range still count.
	events = events[:0]
	start := mustTime("2024-07-02T00:00:00Z")
	for m := 0; m <= 9*24*60; m += 25 {
		events = append(events, pv(3, start.Add(timeMinutes(m)).Format("2006-01-02T15:04:05Z"), "/"))
	}
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["visits","visit_duration"],"date_range":"day"}`, events...)
	checkResults(t, res, `[{"dimensions":[],"metrics":[0,0]}]`)
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["visits","pageviews"],"date_range":["2024-07-10T00:00:00+03:00","2024-07-10T00:59:59+03:00"]}`, events...)
	// Pageviews at 00:10 and 00:35 local (minutes 11350 and 11375 after the
	// start, 21:10Z and 21:35Z): 2, one visit.
	checkResults(t, res, `[{"dimensions":[],"metrics":[1,2]}]`)
}

func TestScanLimit(t *testing.T) {
	q, err := Parse([]byte(`{"site_id":"example.com","metrics":["visitors"],"date_range":"day"}`), testSite(), now)
	if err != nil {
		t.Fatal(err)
	}
	src := &sliceSource{events: []Event{pv(1, "2024-07-10T08:00:00Z", "/"), pv(2, "2024-07-10T08:00:00Z", "/"), pv(3, "2024-07-10T08:00:00Z", "/")}}
	_, err = Evaluate(q, src, Config{MaxEvents: 2})
	var le *ScanLimitError
	if !errors.As(err, &le) || !errors.Is(err, ErrTooManyEvents) || le.Limit != 2 {
		t.Fatalf("got %v; want a ScanLimitError of 2", err)
	}
	if err.Error() != "The query reads more than 2 raw events. Please narrow the date range or the filters." {
		t.Errorf("message %q", err)
	}
	failing := errors.New("disk on fire")
	if _, err := Evaluate(q, failingSource{failing}, Config{}); !errors.Is(err, failing) {
		t.Errorf("source error: got %v", err)
	}
	if _, err := Evaluate(q, src, Config{MaxEvents: 3}); err != nil {
		t.Fatalf("3 events with a limit of 3: %v", err)
	}
}

func TestScanWidensForwardForVisitsRunningPastTheRange(t *testing.T) {
	// 2024-07-08 in Tallinn ends at 20:59:59Z. A visit from 20:30Z runs
	// every 20 minutes until 03:10Z on the 9th.
	var events []Event
	for m := 0; m <= 400; m += 20 {
		events = append(events, pv(1, mustTime("2024-07-08T20:30:00Z").Add(timeMinutes(m)).Format("2006-01-02T15:04:05Z"), "/"))
	}
	src := &sliceSource{events: events}
	q, err := Parse([]byte(`{"site_id":"example.com","metrics":["visits","visit_duration","bounce_rate"],"date_range":["2024-07-08","2024-07-08"]}`), testSite(), now)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Evaluate(q, src, Config{})
	if err != nil {
		t.Fatal(err)
	}
	// The whole visit, 400 minutes = 24000 s.
	checkResults(t, res, `[{"dimensions":[],"metrics":[1,24000,0]}]`)
	// Scans: the day with an hour each side, then 2 h, 4 h more forward.
	if len(src.scans) != 3 {
		t.Errorf("scans %v", src.scans)
	}
	for _, s := range src.scans {
		if s[0] < ms("2024-07-07T20:00:00Z") {
			t.Errorf("scanned back to %d: nothing needed it", s[0])
		}
	}
}

type failingSource struct{ err error }

func (f failingSource) ScanSite(string, int64, int64, func(*Event) error) error { return f.err }
