package clickhouse

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/plausible"
	"github.com/waymark/waymark/rollup/query"
)

// Visits worked out by hand from rollup/DESIGN.md's rules (30-minute gap,
// engagement keeps a visit alive but never starts one, bounce is at most
// one pageview, duration from the first event to the last that is not an
// engagement, entry and exit are the first and last pageviews), stored in
// ways that could split or double them.

func pageview(site, path string, tm int64, visitor, prev uint64) ingest.Event {
	return ingest.Event{Kind: ingest.KindPageview, Name: "pageview", Time: tm, VisitorHash: visitor,
		PrevVisitorHash: prev, SiteID: site, Path: path, Node: "e1", Country: "EE"}
}

func engagement(site, path string, tm int64, visitor uint64, engagedMS uint64, scroll uint8) ingest.Event {
	return ingest.Event{Kind: ingest.KindEngagement, Name: "engagement", Time: tm, VisitorHash: visitor,
		SiteID: site, Path: path, Node: "e1", EngagedMS: engagedMS, ScrollDepth: scroll}
}

func newTestBackend(t *testing.T, c *Client, now time.Time) *Backend {
	t.Helper()
	return NewBackend(c, BackendConfig{Now: func() time.Time { return now }})
}

func mustStore(t *testing.T, b *Backend, raw []byte, want Outcome) {
	t.Helper()
	res, err := b.StoreSegment(testCtx(t), raw)
	if err != nil {
		t.Fatalf("StoreSegment: %v", err)
	}
	if res.Outcome != want {
		t.Fatalf("StoreSegment: %v; want %v", res.Outcome, want)
	}
}

func dayRange(from, to int) query.Range {
	return query.Range{From: dec1.AddDate(0, 0, from), To: dec1.AddDate(0, 0, to), Loc: time.UTC}
}

func wantMetrics(t *testing.T, what string, got, want query.SiteMetrics) {
	t.Helper()
	if got != want {
		t.Errorf("%s:\n got  %+v\n want %+v", what, got, want)
	}
}

// One visitor: /a at 10:00, (segment boundary) /b at 10:10, an
// engagement of 90 s on /b at 10:25 (keeps the visit alive), /c at 10:50
// (25 minutes after the engagement: the same visit), then /d at 11:30 (40
// minutes later: a second visit, a bounce). Visit 1: 3 pageviews,
// duration 50 min = 3000 s, entry /a, exit /c. Visit 2: 1 pageview, 0 s,
// bounce. Over the day: 2 visits, 4 pageviews, bounce rate 50, duration
// 1500 s, views per visit 2, time on page 90 s over 1 engaged visit,
// scroll depth 40.
func visitSegments(site string) (a, b []byte) {
	a = segment("e1", 1, []ingest.Event{pageview(site, "/a", at(0, 10, 0, 0, 0), 5, 0)})
	b = segment("e1", 2, []ingest.Event{
		pageview(site, "/b", at(0, 10, 10, 0, 0), 5, 0),
		engagement(site, "/b", at(0, 10, 25, 0, 0), 5, 90_000, 40),
		pageview(site, "/c", at(0, 10, 50, 0, 0), 5, 0),
		pageview(site, "/d", at(0, 11, 30, 0, 0), 5, 0),
	})
	return a, b
}

var twoVisits = query.SiteMetrics{Visitors: 1, Visits: 2, Pageviews: 4, Events: 4, ViewsPerVisit: 2,
	BounceRate: 50, VisitDuration: 1500, TimeOnPage: 90, ScrollDepth: 40}

func TestVisitAcrossTwoSegments(t *testing.T) {
	c := newClient(t, sharedServer(t))
	b := newTestBackend(t, c, dec1.AddDate(0, 0, 2))
	segA, segB := visitSegments("s1")
	// The later segment first: arrival order changes nothing.
	mustStore(t, b, segB, Stored)
	mustStore(t, b, segA, Stored)
	m, err := b.SiteAggregate("s1", dayRange(0, 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantMetrics(t, "day", m, twoVisits)
	entry, err := b.SiteBreakdown("s1", "entry_page", dayRange(0, 1), 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, r := range entry.Results {
		got[r.Value] = r.Visits
	}
	if len(got) != 2 || got["/a"] != 1 || got["/d"] != 1 {
		t.Errorf("entry pages %v; want /a and /d, one visit each", got)
	}
	exit, err := b.SiteBreakdown("s1", "exit_page", dayRange(0, 1), 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	got = map[string]int64{}
	for _, r := range exit.Results {
		got[r.Value] = r.Visits
	}
	if len(got) != 2 || got["/c"] != 1 || got["/d"] != 1 {
		t.Errorf("exit pages %v; want /c and /d, one visit each", got)
	}
	// 10:00-11:00 UTC overlaps visit 1 only (its events there: /a, /b
	// and the engagement): 1 visit of 3000 s, 2 pageviews, 3 views.
	h := query.Range{From: dec1.Add(10 * time.Hour), To: dec1.Add(11 * time.Hour), Loc: time.UTC}
	m, err = b.SiteAggregate("s1", h, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantMetrics(t, "10:00-11:00", m, query.SiteMetrics{Visitors: 1, Visits: 1, Pageviews: 3, Events: 3,
		ViewsPerVisit: 3, VisitDuration: 3000, TimeOnPage: 90, ScrollDepth: 40})
}

func TestVisitAcrossBackendRestart(t *testing.T) {
	srv := sharedServer(t)
	c := newClient(t, srv)
	segA, segB := visitSegments("s1")
	b1 := newTestBackend(t, c, dec1.AddDate(0, 0, 2))
	mustStore(t, b1, segA, Stored)
	b1.Close()
	if _, err := b1.SiteAggregate("s1", dayRange(0, 1), nil); err != query.ErrClosed {
		t.Errorf("closed backend: %v; want ErrClosed", err)
	}
	// Another process (a new client, a new backend) stores the rest.
	c2, err := New(Config{URL: srv.URL(), Database: c.Database()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c2.Close)
	b2 := newTestBackend(t, c2, dec1.AddDate(0, 0, 2))
	mustStore(t, b2, segB, Stored)
	mustStore(t, b2, segA, Duplicate)
	m, err := b2.SiteAggregate("s1", dayRange(0, 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantMetrics(t, "day after restart", m, twoVisits)
}

func TestVisitRetriedSegment(t *testing.T) {
	c := newClient(t, sharedServer(t))
	b := newTestBackend(t, c, dec1.AddDate(0, 0, 2))
	segA, segB := visitSegments("s1")
	mustStore(t, b, segA, Stored)
	mustStore(t, b, segB, Stored)
	// A crash after the events went in and before the identity: the
	// retry inserts every event again.
	if err := c.Exec(testCtx(t), "TRUNCATE TABLE segments"); err != nil {
		t.Fatal(err)
	}
	mustStore(t, b, segB, Stored)
	mustStore(t, b, segA, Stored)
	mustStore(t, b, segB, Duplicate)
	m, err := b.SiteAggregate("s1", dayRange(0, 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantMetrics(t, "day after retries", m, twoVisits)
}

// A visit across midnight UTC: /a at 23:50 under day 0's hash 7; /b at
// 00:10 under day 1's hash 8, carrying 7 as its previous hash (the first
// 30 minutes of a day); /c at 00:35 under 8 alone. One visit of 45 min
// (2700 s), 3 pageviews, one visitor (hash 7, the first event's), entry
// /a, exit /c, no bounce. Day 0 and day 1 each overlap it: one visit of
// 2700 s each, 1 and 2 pageviews, one visitor. A second visitor (hash 9,
// day 1 only, prev 99 never seen) at 00:05 is a visit of its own.
func TestVisitAcrossMidnight(t *testing.T) {
	c := newClient(t, sharedServer(t))
	b := newTestBackend(t, c, dec1.AddDate(0, 0, 3))
	day1 := segment("e1", 2, []ingest.Event{
		pageview("s1", "/b", at(1, 0, 10, 0, 0), 8, 7),
		pageview("s1", "/c", at(1, 0, 35, 0, 0), 8, 0),
		pageview("s1", "/x", at(1, 0, 5, 0, 0), 9, 99),
	})
	day0 := segment("e1", 1, []ingest.Event{pageview("s1", "/a", at(0, 23, 50, 0, 0), 7, 0)})
	mustStore(t, b, day1, Stored) // the later day first
	mustStore(t, b, day0, Stored)

	m, err := b.SiteAggregate("s1", dayRange(0, 2), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantMetrics(t, "both days", m, query.SiteMetrics{Visitors: 2, Visits: 2, Pageviews: 4, Events: 4,
		ViewsPerVisit: 2, BounceRate: 50, VisitDuration: 1350})
	m, err = b.SiteAggregate("s1", dayRange(0, 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantMetrics(t, "day 0", m, query.SiteMetrics{Visitors: 1, Visits: 1, Pageviews: 1, Events: 1,
		ViewsPerVisit: 3, VisitDuration: 2700})
	m, err = b.SiteAggregate("s1", dayRange(1, 2), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantMetrics(t, "day 1", m, query.SiteMetrics{Visitors: 2, Visits: 2, Pageviews: 3, Events: 3,
		ViewsPerVisit: 2, BounceRate: 50, VisitDuration: 1350})
	entry, err := b.SiteBreakdown("s1", "entry_page", dayRange(1, 2), 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(entry.Results) != 2 || entry.Results[0].Value != "/a" || entry.Results[1].Value != "/x" {
		t.Errorf("day 1 entry pages %+v; want /a and /x", entry.Results)
	}

	// The same through Plausible v2: one visitor for the crossing visit.
	q, err := plausible.Parse(json.RawMessage(`{"site_id":"s1","metrics":["visitors","visits","pageviews","visit_duration"],"date_range":["2025-12-01","2025-12-02"]}`),
		plausible.Site{ID: "s1", Domain: "s1", Timezone: "UTC"}, dec1.AddDate(0, 0, 3))
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.QueryV2("s1", q)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 1 {
		t.Fatalf("v2 rows %+v; want one", res.Rows)
	}
	var got []int64
	for _, v := range res.Rows[0].Metrics {
		got = append(got, v.Int)
	}
	if len(got) != 4 || got[0] != 2 || got[1] != 2 || got[2] != 4 || got[3] != 1350 {
		t.Errorf("v2 visitors, visits, pageviews, duration = %v; want [2 2 4 1350]", got)
	}
}

// A site question over more raw events than MaxEvents is refused, as
// the embedded raw path refuses one: a 400, not a slow answer.
func TestSiteQuestionOverMaxEventsIsRefused(t *testing.T) {
	c := newClient(t, sharedServer(t))
	now := dec1.AddDate(0, 0, 2)
	b := NewBackend(c, BackendConfig{Now: func() time.Time { return now }, MaxEvents: 3})
	segA, segB := visitSegments("s1") // 5 events
	mustStore(t, b, segA, Stored)
	mustStore(t, b, segB, Stored)
	if _, err := b.SiteAggregate("s1", dayRange(0, 1), nil); !errors.Is(err, query.ErrUnsupportedQuery) {
		t.Errorf("aggregate over 5 events with MaxEvents 3: %v; want ErrUnsupportedQuery", err)
	}
	q, err := plausible.Parse(json.RawMessage(`{"site_id":"s1","metrics":["visits"],"date_range":["2025-12-01","2025-12-01"]}`),
		plausible.Site{ID: "s1", Domain: "s1", Timezone: "UTC"}, now)
	if err != nil {
		t.Fatal(err)
	}
	var se *plausible.ScanLimitError
	if _, err := b.QueryV2("s1", q); !errors.As(err, &se) {
		t.Errorf("v2 over 5 events with MaxEvents 3: %v; want a ScanLimitError", err)
	}
	// Within the bound it answers.
	b = NewBackend(c, BackendConfig{Now: func() time.Time { return now }, MaxEvents: 5})
	if m, err := b.SiteAggregate("s1", dayRange(0, 1), nil); err != nil || m.Visits != 2 {
		t.Errorf("aggregate with MaxEvents 5: %+v, %v; want 2 visits", m, err)
	}
}
