package clickhouse

import (
	"context"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
)

// wantFromRows checks that a question over r of site is answered from
// site rows alone: its horizon is at or past the range's end.
func wantFromRows(t *testing.T, b *Backend, site string, r query.Range) {
	t.Helper()
	lo, hi := hourBounds(r)
	p, err := b.plan(testCtx(t), site, lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	if p == nil || p.h < hi {
		t.Fatalf("plan of %v: %+v; want site rows up to the range's end", r, p)
	}
}

func mustMaterialize(t *testing.T, b *Backend) int {
	t.Helper()
	n, err := b.MaterializeOnce(testCtx(t))
	if err != nil {
		t.Fatalf("MaterializeOnce: %v", err)
	}
	return n
}

// A segment that arrives after its day was materialized: the answer is
// right at once (its units are dirty, so the question reads raw events
// from there) and again from rows after the loop re-materializes them,
// each event counted once. By hand (visitSegments): segment a alone is
// one visit of one pageview (/a at 10:00, a bounce of 0 s); with b, the
// day is twoVisits.
func TestLateSegmentIsRematerialized(t *testing.T) {
	c := newClient(t, sharedServer(t))
	b := newTestBackend(t, c, dec1.AddDate(0, 0, 2))
	segA, segB := visitSegments("s1")
	mustStore(t, b, segA, Stored)
	if n := mustMaterialize(t, b); n == 0 {
		t.Fatal("nothing materialized")
	}
	day := dayRange(0, 1)
	wantFromRows(t, b, "s1", day)
	m, err := b.SiteAggregate("s1", day, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantMetrics(t, "segment a, from rows", m, query.SiteMetrics{Visitors: 1, Visits: 1, Pageviews: 1, Events: 1, ViewsPerVisit: 1, BounceRate: 100})

	mustStore(t, b, segB, Stored) // late: its units are marked dirty
	lo, hi := hourBounds(day)
	if p, err := b.plan(testCtx(t), "s1", lo, hi); err != nil || p != nil && p.h > at(0, 10, 0, 0, 0) {
		t.Fatalf("plan after the late segment: %+v, %v; want the horizon at or before 10:00", p, err)
	}
	m, err = b.SiteAggregate("s1", day, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantMetrics(t, "with the late segment, before re-materializing", m, twoVisits)

	if n := mustMaterialize(t, b); n == 0 {
		t.Fatal("the dirty units were not materialized again")
	}
	wantFromRows(t, b, "s1", day)
	mustStore(t, b, segB, Duplicate)
	for _, r := range []query.Range{day, dayRange(0, 2)} {
		m, err = b.SiteAggregate("s1", r, nil)
		if err != nil {
			t.Fatal(err)
		}
		wantMetrics(t, "re-materialized", m, twoVisits)
	}
	if n := mustMaterialize(t, b); n != 0 {
		t.Errorf("a third run wrote %d units; want none", n)
	}
}

// A segment stored twice (its identity lost between its events and the
// record, so the retry inserts every event again), before and after
// materializing: counted once from the rows.
func TestRetriedSegmentCountsOnceInRows(t *testing.T) {
	c := newClient(t, sharedServer(t))
	b := newTestBackend(t, c, dec1.AddDate(0, 0, 2))
	segA, segB := visitSegments("s1")
	mustStore(t, b, segA, Stored)
	mustStore(t, b, segB, Stored)
	if err := c.Exec(testCtx(t), "TRUNCATE TABLE segments"); err != nil {
		t.Fatal(err)
	}
	mustStore(t, b, segB, Stored)
	mustMaterialize(t, b)
	day := dayRange(0, 1)
	wantFromRows(t, b, "s1", day)
	m, err := b.SiteAggregate("s1", day, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantMetrics(t, "retried, from rows", m, twoVisits)

	// Again after materializing: the third copy marks its units dirty.
	if err := c.Exec(testCtx(t), "TRUNCATE TABLE segments"); err != nil {
		t.Fatal(err)
	}
	mustStore(t, b, segA, Stored)
	mustStore(t, b, segB, Stored)
	if m, err = b.SiteAggregate("s1", day, nil); err != nil {
		t.Fatal(err)
	}
	wantMetrics(t, "retried after materializing", m, twoVisits)
	if n := mustMaterialize(t, b); n == 0 {
		t.Error("the retried segment's units were not materialized again")
	}
	wantFromRows(t, b, "s1", day)
	if m, err = b.SiteAggregate("s1", day, nil); err != nil {
		t.Fatal(err)
	}
	wantMetrics(t, "retried, re-materialized", m, twoVisits)
	ts, err := b.SiteTimeseries("s1", day, query.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	// By hand, per hour: 10:00 holds all of visit 1 (/a, /b, its
	// engagement, /c at 10:50, where it ends); 11:00 holds visit 2 (/d at
	// 11:30) alone.
	var pv [24]int64
	var visits [24]int64
	for i, p := range ts {
		pv[i], visits[i] = p.Pageviews, p.Visits
	}
	if pv[10] != 3 || pv[11] != 1 || visits[10] != 1 || visits[11] != 1 {
		t.Errorf("hours 10 and 11: pageviews %d, %d, visits %d, %d; want 3, 1, 1, 1", pv[10], pv[11], visits[10], visits[11])
	}
}

// Clicks of a materialized hour that arrive late: counted at once (the
// hour is dirty, so the question reads its raw clicks) and after the hour
// is materialized again, once. By hand: link k1 has 2 clicks at 09:00 and
// 09:30 of day 0 (visitors 1 and 2), a bot click at 10:00; the late
// segment adds 2 at 09:15 (visitor 1 again, and 3) and one at 14:00.
func TestLateClicksAreRematerialized(t *testing.T) {
	c := newClient(t, sharedServer(t))
	b := newTestBackend(t, c, dec1.AddDate(0, 0, 2))
	mustStore(t, b, segment("e1", 1, []ingest.Event{
		click("k1", at(0, 9, 0, 0, 0), 1, false), click("k1", at(0, 9, 30, 0, 0), 2, false), click("k1", at(0, 10, 0, 0, 0), 9, true),
	}), Stored)
	mustMaterialize(t, b)
	day := dayRange(0, 1)
	want := func(what string, clicks, bots int64, visitors uint64, hour9 int64, country int64) {
		t.Helper()
		ls, err := b.LinkStats("k1", day, query.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if ls.Totals.Clicks != clicks || ls.Totals.BotClicks != bots || ls.Totals.UniqueVisitors != visitors || ls.Series[9].Clicks != hour9 {
			t.Errorf("%s: totals %+v, 09:00 %d; want %d clicks, %d bots, %d visitors, %d at 09:00", what, ls.Totals, ls.Series[9].Clicks, clicks, bots, visitors, hour9)
		}
		bd, err := b.LinkBreakdown("k1", "country", day, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(bd.Results) != 1 || bd.Results[0].Value != "EE" || bd.Results[0].Clicks != country {
			t.Errorf("%s: breakdown %+v; want EE with %d clicks", what, bd.Results, country)
		}
	}
	lo, hi := hourBounds(day)
	if p, err := b.linkPlan(testCtx(t), lo, hi); err != nil || p == nil || p.h < hi {
		t.Fatalf("link plan: %+v, %v; want rows up to the day's end", p, err)
	}
	want("materialized", 2, 1, 2, 2, 2)
	mustStore(t, b, segment("e1", 2, []ingest.Event{
		click("k1", at(0, 9, 15, 0, 0), 1, false), click("k1", at(0, 9, 45, 0, 0), 3, false), click("k1", at(0, 14, 0, 0, 0), 3, false),
	}), Stored)
	if p, err := b.linkPlan(testCtx(t), lo, hi); err != nil || p != nil && p.h > at(0, 9, 0, 0, 0) {
		t.Fatalf("link plan after late clicks: %+v, %v; want the horizon at 09:00", p, err)
	}
	want("late, before re-materializing", 5, 1, 3, 4, 5)
	if n := mustMaterialize(t, b); n == 0 {
		t.Fatal("the late hours were not materialized again")
	}
	if p, err := b.linkPlan(testCtx(t), lo, hi); err != nil || p == nil || p.h < hi {
		t.Fatalf("link plan: %+v, %v; want rows up to the day's end", p, err)
	}
	want("re-materialized", 5, 1, 3, 4, 5)
}

// MaterializeLoop materializes what is stored, and returns when its
// context ends.
func TestMaterializeLoopRunsUntilCancelled(t *testing.T) {
	c := newClient(t, sharedServer(t))
	b := newTestBackend(t, c, dec1.AddDate(0, 0, 2))
	segA, segB := visitSegments("s1")
	mustStore(t, b, segA, Stored)
	mustStore(t, b, segB, Stored)
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan struct{})
	errs := make(chan error, 100)
	go func() {
		defer close(done)
		b.MaterializeLoop(ctx, 20*time.Millisecond, func(err error) {
			select {
			case errs <- err:
			default:
			}
		})
	}()
	day := dayRange(0, 1)
	lo, hi := hourBounds(day)
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := b.plan(testCtx(t), "s1", lo, hi)
		if err != nil {
			t.Fatal(err)
		}
		if p != nil && p.h >= hi {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the loop did not materialize the day in 30 s (plan %+v)", p)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("MaterializeLoop did not return after its context ended")
	}
	select {
	case err := <-errs:
		t.Errorf("the loop reported %v", err)
	default:
	}
	m, err := b.SiteAggregate("s1", day, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantMetrics(t, "after the loop", m, twoVisits)
}

// The materializer's queue (waymark_clickhouse_site_units_pending): a
// unit ready by the clock whose visit is still open is left and counted,
// and written by the first pass after the visit went idle. Hand-worked,
// lateness 5 min: one visit 10:00-11:20 (four pageviews 25 min apart).
// At 11:50 unit 10 is ready (11:00 + 30 + 5 min <= 11:50) but its visit
// is not idle (11:20 >= 11:50 - 35 min): 1 pending. At 12:00 it is
// (11:20 < 11:25): unit 10 written, 0 pending.
func TestMaterializerCountsWhatItLeaves(t *testing.T) {
	c := newClient(t, sharedServer(t))
	evs := []ingest.Event{
		pageview("sq", "/1", at(0, 10, 0, 0, 0), 7, 0),
		pageview("sq", "/2", at(0, 10, 25, 0, 0), 7, 0),
		pageview("sq", "/3", at(0, 10, 50, 0, 0), 7, 0),
		pageview("sq", "/4", at(0, 11, 20, 0, 0), 7, 0),
	}
	early := newTestBackend(t, c, time.UnixMilli(at(0, 11, 50, 0, 0)))
	mustStore(t, early, segment("e1", 1, evs), Stored)
	passes := c.m.passes.Get()
	// (The store marked the hours before the event dirty: those are
	// written, empty, by this pass.)
	if _, err := early.MaterializeOnce(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	// Unit 10 owns no visit (the one going on closes at 11:50, in unit
	// 11): written, nothing left.
	if got := c.m.unitsPending.Load(); got != 0 {
		t.Errorf("at 11:50: %d units pending; want 0", got)
	}
	later := newTestBackend(t, c, time.UnixMilli(at(0, 12, 40, 0, 0)))
	units := c.m.unitsMaterialized.Get()
	if _, err := later.MaterializeOnce(testCtx(t)); err != nil || c.m.unitsMaterialized.Get()-units != 1 {
		t.Fatalf("at 12:40: %d site units, %v; want unit 11", c.m.unitsMaterialized.Get()-units, err)
	}
	if got := c.m.unitsPending.Load(); got != 0 {
		t.Errorf("at 12:40: %d units pending; want 0", got)
	}
	if got := c.m.passes.Get() - passes; got != 2 {
		t.Errorf("%d passes counted; want 2", got)
	}
}
