package clickhouse

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
)

// A batch's late events mark each of their sites dirty with one
// site_dirty row (from the oldest late event's hour on), all in one
// INSERT, and the units from there are materialized again.
//
// Hand-worked: now is day 3 00:00, so with the default 5 minutes of
// lateness and the 30-minute visit gap the ready units are those before
// day 2 23:00. Stored and materialized first: s1's visitor 1 on / at day 1
// 10:00, 10:25, 10:50, 11:15, 11:40 (one visit of 6,000 s, closing in
// unit 12:00); s2's visitor 5 on / at day 0 12:00 (a bounce). The late
// batch: s1's visitor 1 on /late at day 1 10:05 (the same visit, whose
// unit is 12:00, not the event's 10:00) and visitor 3 on /b at 11:30 (a
// bounce), s2's visitor 2 at day 1 06:15 (a bounce). Its marks: s1 from
// day 1 10:00, s2 from day 1 06:00, two rows, no site_units row. Written
// again: s1's units day 1 10:00 to day 2 22:00, 14 + 23 = 37; s2's from
// day 1 06:00, 18 + 23 = 41. Then day 0 to day 2 23:00: s1 2 visits and visitors, 7
// pageviews, 3.5 a visit, one bounce of two, (6,000 + 0) / 2 s; s2 2
// visits and visitors, 2 pageviews, both bounces.
func TestLateMarksOfABatchInOneInsert(t *testing.T) {
	c := newClient(t, sharedServer(t))
	ctx := testCtx(t)
	b := newTestBackend(t, c, dec1.AddDate(0, 0, 3))
	var base []ingest.Event
	for k := range 5 {
		base = append(base, pageview("s1", "/", at(1, 10, 25*k, 0, 0), 1, 0))
	}
	base = append(base, pageview("s2", "/", at(0, 12, 0, 0, 0), 5, 0), click("k1", at(1, 9, 30, 0, 0), 8, false))
	mustStore(t, b, segment("e1", 1, base), Stored)
	mustMaterialize(t, b)
	days := query.Range{From: dec1, To: dec1.AddDate(0, 0, 2).Add(23 * time.Hour), Loc: time.UTC} // every ready unit
	wantFromRows(t, b, "s1", days)
	m, err := b.SiteAggregate("s1", days, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantMetrics(t, "s1 before the late batch", m, query.SiteMetrics{Visitors: 1, Visits: 1, Pageviews: 5, Events: 5, ViewsPerVisit: 5, VisitDuration: 6000})

	before := maxDirtyVersion(t, c)
	seg1 := segment("e1", 2, []ingest.Event{pageview("s1", "/late", at(1, 10, 5, 0, 0), 1, 0), pageview("s2", "/", at(1, 6, 15, 0, 0), 2, 0)})
	seg2 := segment("e1", 3, []ingest.Event{pageview("s1", "/b", at(1, 11, 30, 0, 0), 3, 0), click("k1", at(1, 9, 10, 0, 0), 7, false), click("k1", at(1, 13, 0, 0, 0), 7, false)})
	reqs := c.m.requests.Get()
	out, errs := b.StoreSegments(ctx, [][]byte{seg1, seg2})
	for i := range out {
		if errs[i] != nil || out[i].Outcome != Stored {
			t.Fatalf("segment %d: %+v, %v; want stored", i, out[i], errs[i])
		}
	}
	if got := c.m.requests.Get() - reqs; got != 4 {
		t.Errorf("a batch with late events of two sites took %d requests; want 4 (lookup, events, marks, identities)", got)
	}
	want := []string{
		fmt.Sprintf(" %d %d 1", at(1, 9, 0, 0, 0)/1000, at(1, 14, 0, 0, 0)/1000),
		fmt.Sprintf("s1 %d 0 1", at(1, 10, 0, 0, 0)/1000),
		fmt.Sprintf("s2 %d 0 1", at(1, 6, 0, 0, 0)/1000),
	}
	if got := dirtyMarks(t, c, before); strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("the batch's dirty marks (site from until rows): %q; want %q", got, want)
	}
	if r, err := c.Query(ctx, "SELECT count() FROM site_units WHERE state = 0"); err != nil {
		t.Fatal(err)
	} else if n, _ := rawRow(r.Data[0])[0].uint(); n != 0 {
		t.Errorf("%d dirty site_units rows; want none", n)
	}

	s1 := query.SiteMetrics{Visitors: 2, Visits: 2, Pageviews: 7, Events: 7, ViewsPerVisit: 3.5, BounceRate: 50, VisitDuration: 3000}
	s2 := query.SiteMetrics{Visitors: 2, Visits: 2, Pageviews: 2, Events: 2, ViewsPerVisit: 1, BounceRate: 100}
	for site, mark := range map[string]int64{"s1": at(1, 10, 0, 0, 0), "s2": at(1, 6, 0, 0, 0)} {
		lo, hi := hourBounds(days)
		if p, err := b.plan(ctx, site, lo, hi); err != nil || p != nil && p.h > mark {
			t.Errorf("plan of %s after the late batch: %+v, %v; want the horizon at or before its mark", site, p, err)
		}
	}
	check := func(label string) {
		t.Helper()
		for site, w := range map[string]query.SiteMetrics{"s1": s1, "s2": s2} {
			m, err := b.SiteAggregate(site, days, nil)
			if err != nil {
				t.Fatal(err)
			}
			wantMetrics(t, label+" "+site, m, w)
		}
	}
	check("before materializing again")

	if ls, err := b.LinkStats("k1", days, query.Day); err != nil || ls.Totals.Clicks != 3 {
		t.Errorf("k1 before materializing again: %+v, %v; want 3 clicks", ls.Totals, err)
	}
	done, linkDone := c.m.unitsMaterialized.Get(), c.m.linkHoursMaterialized.Get()
	mustMaterialize(t, b)
	if got := c.m.unitsMaterialized.Get() - done; got != 37+41 {
		t.Errorf("%d units materialized again; want 37 + 41", got)
	}
	if got := c.m.linkHoursMaterialized.Get() - linkDone; got != 5 {
		t.Errorf("%d link hours materialized again; want 5 (09:00 to 13:00)", got)
	}
	lo, hi := hourBounds(days)
	if p, err := b.linkPlan(ctx, lo, hi); err != nil || p == nil || p.h < hi {
		t.Errorf("link plan after materializing again: %+v, %v; want rows up to the range's end", p, err)
	}
	if ls, err := b.LinkStats("k1", days, query.Day); err != nil || ls.Totals.Clicks != 3 || ls.Totals.UniqueVisitors != 2 {
		t.Errorf("k1 materialized again: %+v, %v; want 3 clicks of 2 visitors", ls.Totals, err)
	}
	wantFromRows(t, b, "s1", days)
	wantFromRows(t, b, "s2", days)
	check("materialized again")
	entry, err := b.SiteBreakdown("s1", "page", days, 10, nil)
	if err != nil || len(entry.Results) != 3 {
		t.Errorf("s1's pages: %+v, %v; want /, /b and /late", entry, err)
	}
	if n := mustMaterialize(t, b); n != 0 {
		t.Errorf("a third pass wrote %d units; want none", n)
	}
}

// maxDirtyVersion is the highest version of site_dirty (0: none).
func maxDirtyVersion(t *testing.T, c *Client) uint64 {
	t.Helper()
	r, err := c.Query(testCtx(t), "SELECT max(version) FROM site_dirty")
	if err != nil {
		t.Fatal(err)
	}
	v, err := rawRow(r.Data[0])[0].uint()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// dirtyMarks lists the site_dirty rows above a version as "site from
// until count" (seconds), without FINAL: each row written counts.
func dirtyMarks(t *testing.T, c *Client, above uint64) []string {
	t.Helper()
	r, err := c.Query(testCtx(t), fmt.Sprintf("SELECT site, toUInt32(from_unit), toUInt32(until_unit), count() FROM site_dirty WHERE version > %d GROUP BY site, from_unit, until_unit ORDER BY site, from_unit", above))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, raw := range r.Data {
		row := rawRow(raw)
		site, _ := row[0].str()
		from, _ := row[1].uint()
		until, _ := row[2].uint()
		n, _ := row[3].uint()
		out = append(out, fmt.Sprintf("%s %d %d %d", site, from, until, n))
	}
	return out
}
