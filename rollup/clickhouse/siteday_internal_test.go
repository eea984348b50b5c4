package clickhouse

import (
	"reflect"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
)

// Day rows and the site row cache, by hand. Site "dr":
//
//	day 0: visitor 1 /a 00:10 (bounce); visitor 2 /a 10:05, /b 10:10
//	       (one visit, 300 s); visitor 3 /b 14:00 (bounce)
//	day 1: visitor 4 /a 09:00 (bounce)
//
// By day: day 0 3 visitors, 3 visits, 4 pageviews, views per visit 1.33,
// bounce rate 67, duration 100 s; day 1 1, 1, 1, 1, 100, 0. By page over
// both days: /a 3 pageviews from 3 visitors in 3 visits, /b 2, 2, 2.
// Then a late segment: visitor 5 /b at day 0 11:00 (bounce): day 0 is 4,
// 4, 5, 1.25, 75, 75 s and /b 3, 3, 3 (/a first on the tie).
func TestDayRowsAnswerAndNeverGoStale(t *testing.T) {
	c := newClient(t, sharedServer(t))
	b := newTestBackend(t, c, dec1.AddDate(0, 0, 3))
	mustStore(t, b, segment("e1", 1, []ingest.Event{
		pageview("dr", "/a", at(0, 0, 10, 0, 0), 1, 0),
		pageview("dr", "/a", at(0, 10, 5, 0, 0), 2, 0),
		pageview("dr", "/b", at(0, 10, 10, 0, 0), 2, 0),
		pageview("dr", "/b", at(0, 14, 0, 0, 0), 3, 0),
		pageview("dr", "/a", at(1, 9, 0, 0, 0), 4, 0),
	}), Stored)
	mustMaterialize(t, b)
	two := dayRange(0, 2)
	day1 := query.SiteMetrics{Visitors: 1, Visits: 1, Pageviews: 1, Events: 1, ViewsPerVisit: 1, BounceRate: 100}
	series := func(what string, want0 query.SiteMetrics) {
		t.Helper()
		wantFromRows(t, b, "dr", two)
		pts, err := b.SiteTimeseries("dr", two, query.Day, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(pts) != 2 {
			t.Fatalf("%s: %d points; want 2", what, len(pts))
		}
		wantMetrics(t, what+", day 0", pts[0].SiteMetrics, want0)
		wantMetrics(t, what+", day 1", pts[1].SiteMetrics, day1)
	}
	breakdown := func(what string, want []query.SiteBreakdownRow) {
		t.Helper()
		bd, err := b.SiteBreakdown("dr", "page", two, 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(bd.Results, want) || !reflect.DeepEqual(bd.Estimated, []string{"visitors"}) {
			t.Errorf("%s:\n got  %+v (estimated %q)\n want %+v (estimated visitors)", what, bd.Results, bd.Estimated, want)
		}
	}
	page := func(v string, n int64, share float64) query.SiteBreakdownRow {
		return query.SiteBreakdownRow{Value: v, Share: share,
			SiteMetrics: query.SiteMetrics{Visitors: uint64(n), Visits: n, Pageviews: n, Events: n}}
	}
	before := query.SiteMetrics{Visitors: 3, Visits: 3, Pageviews: 4, Events: 4, ViewsPerVisit: 1.33, BounceRate: 67, VisitDuration: 100}
	series("from rows", before)
	breakdown("by page", []query.SiteBreakdownRow{page("/a", 3, 0.6), page("/b", 2, 0.4)})

	// Both days were whole for those questions: their day rows are cached
	// under the versions of their 24 units, and asking again reads no row.
	lo, hi := hourBounds(two)
	p, err := b.plan(testCtx(t), "dr", lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	for d := int64(0); d < 2; d++ {
		d0 := hourOf(at(int(d), 0, 0, 0, 0))
		for _, dim := range []string{"", "page"} {
			if _, ok := b.sites.get(siteRowKey{site: "dr", dim: dim, unit: d0, version: p.dayVersion(d0), day: true}); !ok {
				t.Errorf("no day rows of day %d under %q cached", d, dim)
			}
		}
	}
	misses := c.m.siteCache.misses.Get()
	series("asked again", before)
	if got := c.m.siteCache.misses.Get(); got != misses {
		t.Errorf("asked again: %d cache misses; want none", got-misses)
	}

	// A range ending inside day 0 is not answered from its day rows:
	// [00:00, 10:00) overlaps only visitor 1's visit.
	m, err := b.SiteAggregate("dr", query.Range{From: dec1, To: dec1.Add(10 * time.Hour), Loc: time.UTC}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantMetrics(t, "day 0 before 10:00", m, query.SiteMetrics{Visitors: 1, Visits: 1, Pageviews: 1, Events: 1, ViewsPerVisit: 1, BounceRate: 100})

	// The late event: right at once (raw from 11:00) and after the loop
	// wrote day 0 again, never the cached day row of the old versions.
	mustStore(t, b, segment("e1", 2, []ingest.Event{pageview("dr", "/b", at(0, 11, 0, 0, 0), 5, 0)}), Stored)
	after := query.SiteMetrics{Visitors: 4, Visits: 4, Pageviews: 5, Events: 5, ViewsPerVisit: 1.25, BounceRate: 75, VisitDuration: 75}
	lateRows := []query.SiteBreakdownRow{page("/a", 3, 0.5), page("/b", 3, 0.5)}
	pts, err := b.SiteTimeseries("dr", two, query.Day, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantMetrics(t, "late, before materializing, day 0", pts[0].SiteMetrics, after)
	if n := mustMaterialize(t, b); n == 0 {
		t.Fatal("the dirty units were not materialized again")
	}
	series("late, materialized again", after)
	breakdown("late, by page", lateRows)

	// The materializer wrote both days' day rows in ClickHouse, then again
	// under their new versions (the late event dirtied every unit from
	// 11:00 on): four marks. With the hour rows gone, a new Backend (no
	// cache) can answer only from them, and only from the new versions:
	// day 0's old rows (3 visitors) are still there.
	res, err := c.Query(testCtx(t), "SELECT count() FROM site_days WHERE site = 'dr' AND dim = "+String(siteDayMark))
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := rawValue(res.Data[0][0]).int(); n != 4 {
		t.Errorf("%d day marks; want 4 (days 0 and 1, twice)", n)
	}
	if err := c.Exec(testCtx(t), "TRUNCATE TABLE site_rows"); err != nil {
		t.Fatal(err)
	}
	b = newTestBackend(t, c, dec1.AddDate(0, 0, 3))
	series("from stored day rows alone", after)
	breakdown("from stored day rows alone, by page", lateRows)

	// That breakdown summed the page rows in ClickHouse and left a
	// background read caching them: polled for, then asked from the cache.
	p, err = b.plan(testCtx(t), "dr", lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	d0 := hourOf(at(0, 0, 0, 0, 0))
	k := siteRowKey{site: "dr", dim: "page", unit: d0, version: p.dayVersion(d0), day: true}
	for deadline := time.Now().Add(30 * time.Second); ; {
		b.sites.mu.Lock()
		_, ok := b.sites.entries[k]
		b.sites.mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stored page rows of day 0 were never cached")
		}
		time.Sleep(10 * time.Millisecond)
	}
	misses = c.m.siteCache.misses.Get()
	breakdown("from the cache filled in the background, by page", lateRows)
	if got := c.m.siteCache.misses.Get(); got != misses {
		t.Errorf("after the fill: %d cache misses; want none", got-misses)
	}
}
