package rollup

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
)

// TestRebuildRefusesPastRawRetention: once a day's raw events are gone its
// rollups are all that is left of it, so a rebuild that reaches it is
// refused and changes nothing (it used to wipe 42 stored pageviews to 0).
func TestRebuildRefusesPastRawRetention(t *testing.T) {
	clock := &testClock{now: base}
	cfg := testConfig(t, t.TempDir(), clock)
	cfg.Retention = 48 * time.Hour
	a := openTest(t, cfg)
	srv := startServer(t, a)
	old := base.Add(-40 * time.Hour) // day D-2 at base
	var evs []ingest.Event
	for i := range 42 {
		ev := pageview("old", i, "s1", old.Add(time.Duration(i)*time.Second), false)
		ev.VisitorHash = uint64(i + 1)
		evs = append(evs, ev)
	}
	srv.ship(t, segmentBytes("edge-1", 1, evs...))
	day := query.Range{From: old.Truncate(24 * time.Hour), To: old.Truncate(24 * time.Hour).Add(24 * time.Hour)}
	want := func(when string) {
		t.Helper()
		m, err := a.SiteAggregate("s1", day, nil)
		if err != nil {
			t.Fatalf("SiteAggregate: %v", err)
		}
		if m.Pageviews != 42 || m.Visits != 42 {
			t.Errorf("%s: got %d pageviews, %d visits; want 42 and 42", when, m.Pageviews, m.Visits)
		}
	}
	want("stored")

	clock.Set(base.Add(24 * time.Hour)) // D-2 is now past the 48 h raw retention
	if err := a.ApplyRetention(); err != nil {
		t.Fatalf("ApplyRetention: %v", err)
	}
	wantCount(t, a, Filter{SiteID: "s1"}, 0) // the raw events are gone
	want("after raw retention")
	err := a.Rebuild(day.From, day.From)
	if !errors.Is(err, ErrRebuildRange) {
		t.Fatalf("Rebuild of an expired day: got %v; want ErrRebuildRange", err)
	}
	want("after the refused rebuild")
}

// TestRebuildDuringIngestLosesNothing: batches keep being applied while
// days are rebuilt (the lock is taken per day, to write it), and every
// event of both ends up counted once, in the raw counts and the rollups.
func TestRebuildDuringIngestLosesNothing(t *testing.T) {
	a := openTest(t, testConfig(t, t.TempDir(), &testClock{now: base}))
	srv := startServer(t, a)
	const first, later = 200, 200
	mk := func(label string, n int, at time.Time) []byte {
		var evs []ingest.Event
		for i := range n {
			ev := click(label, i, "abc", at.Add(time.Duration(i)*time.Second), false)
			ev.VisitorHash = uint64(i + 1)
			evs = append(evs, ev)
		}
		return segmentBytes("edge-"+label, 1, evs...)
	}
	// Yesterday and today, so a rebuild of both races with today's batches.
	srv.ship(t, mk("a", first, base.Add(-26*time.Hour)))
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range later / 20 {
			srv.ship(t, mk("b"+string(rune('a'+i)), 20, base.Add(-time.Hour+time.Duration(i)*time.Minute)))
		}
	})
	for range 3 {
		if err := a.Rebuild(base.Add(-48*time.Hour), base); err != nil {
			t.Fatalf("Rebuild: %v", err)
		}
	}
	wg.Wait()
	wantCount(t, a, Filter{Code: "abc"}, first+later)
	st, err := a.LinkStats("abc", query.Range{From: base.Add(-72 * time.Hour), To: base.Add(time.Hour)}, query.Day)
	if err != nil {
		t.Fatalf("LinkStats: %v", err)
	}
	if st.Totals.Clicks != first+later {
		t.Errorf("clicks in the rollups: got %d; want %d", st.Totals.Clicks, first+later)
	}
	if n, _ := a.LinkClicks("abc"); n != first+later {
		t.Errorf("all-time clicks: got %d; want %d", n, first+later)
	}
}

// TestLateEventsFolded: an event that arrives three days after it
// happened (an aggregator outage) is in the rollups, not only raw, and a
// rebuild keeps it there.
func TestLateEventsFolded(t *testing.T) {
	a := openTest(t, testConfig(t, t.TempDir(), &testClock{now: base}))
	srv := startServer(t, a)
	at := base.Add(-72 * time.Hour)
	srv.ship(t, segmentBytes("edge-1", 1, click("late", 1, "abc", at, false), click("late", 2, "abc", at.Add(time.Minute), false)))
	if got := a.rm.eventsLate.Get(); got != 2 {
		t.Errorf("late events counted: got %d; want 2", got)
	}
	r := query.Range{From: at.Add(-time.Hour), To: at.Add(time.Hour)}
	check := func(when string) {
		t.Helper()
		st, err := a.LinkStats("abc", r, query.Hour)
		if err != nil {
			t.Fatalf("LinkStats: %v", err)
		}
		if st.Totals.Clicks != 2 {
			t.Errorf("%s: clicks got %d; want 2", when, st.Totals.Clicks)
		}
	}
	check("applied")
	if err := a.Rebuild(at, at); err != nil {
		t.Fatalf("Rebuild: %v", err)
	}
	check("rebuilt")
}

// TestNewAndReturningVisits: a visit is "returning" when its visitor had
// an earlier visit the same day (the same daily hash), whatever order the
// events arrive in.
func TestNewAndReturningVisits(t *testing.T) {
	a := openTest(t, testConfig(t, t.TempDir(), &testClock{now: base}))
	srv := startServer(t, a)
	at := base.Add(-5 * time.Hour)
	mk := func(n int, off time.Duration, hash uint64) ingest.Event {
		ev := pageview("nr", n, "s1", at.Add(off), false)
		ev.VisitorHash = hash
		return ev
	}
	// Visitor 1: visits at 0 and 2 h (two visits); visitor 2: one visit.
	// The later visit arrives first.
	srv.ship(t,
		segmentBytes("edge-1", 1, mk(1, 2*time.Hour, 1)),
		segmentBytes("edge-1", 2, mk(2, 0, 1), mk(3, time.Minute, 1)),
		segmentBytes("edge-1", 3, mk(4, 30*time.Minute, 2)))
	bd, err := a.SiteBreakdown("s1", "visitor_type", query.Range{From: at.Add(-time.Hour), To: at.Add(4 * time.Hour)}, 10, nil)
	if err != nil {
		t.Fatalf("SiteBreakdown: %v", err)
	}
	got := map[string][2]int64{}
	for _, row := range bd.Results {
		got[row.Value] = [2]int64{row.Visits, int64(row.Visitors)}
	}
	want := map[string][2]int64{visitorNew: {2, 2}, visitorReturning: {1, 1}}
	if len(got) != 2 || got[visitorNew] != want[visitorNew] || got[visitorReturning] != want[visitorReturning] {
		t.Errorf("visits, visitors by visitor type: got %v; want %v", got, want)
	}
}

// TestDaySealedAfterMidnight: today's rows are written as hours only; once
// the day is over, Seal writes its day rows (and a month's, once it is
// over), and the numbers are the same from hours, from day rows, and
// after the hour tier has expired.
func TestDaySealedAfterMidnight(t *testing.T) {
	clock := &testClock{now: base}
	cfg := testConfig(t, t.TempDir(), clock)
	cfg.HourRetention = 48 * time.Hour
	a := openTest(t, cfg)
	srv := startServer(t, a)
	var evs []ingest.Event
	for i := range 30 {
		ev := pageview("seal", i, "s1", base.Add(-time.Duration(i)*time.Minute), false)
		ev.VisitorHash = uint64(i%10 + 1)
		evs = append(evs, ev, click("sealc", i, "abc", base.Add(-time.Duration(i)*time.Minute), false))
	}
	srv.ship(t, segmentBytes("edge-1", 1, evs...))
	today := base.Truncate(24 * time.Hour)
	r := query.Range{From: today, To: today.Add(24 * time.Hour)}
	check := func(when string) {
		t.Helper()
		m, err := a.SiteAggregate("s1", r, nil)
		if err != nil {
			t.Fatalf("SiteAggregate: %v", err)
		}
		if m.Pageviews != 30 || m.Visits != 10 || m.Visitors != 10 {
			t.Errorf("%s: got %d pageviews, %d visits, %d visitors; want 30, 10, 10", when, m.Pageviews, m.Visits, m.Visitors)
		}
		st, err := a.LinkStats("abc", r, query.Day)
		if err != nil || st.Totals.Clicks != 30 || len(st.Series) != 1 || st.Series[0].Clicks != 30 {
			t.Errorf("%s: link stats %+v (err %v); want 30 clicks in one day", when, st, err)
		}
	}
	check("from hours")
	if a.daySealed(uint32(dayOf(base.UnixMilli()))) {
		t.Fatalf("today is sealed already")
	}
	clock.Set(today.Add(24*time.Hour + time.Minute))
	if err := a.Seal(); err != nil {
		t.Fatalf("Seal: %v", err)
	}
	if !a.daySealed(uint32(dayOf(base.UnixMilli()))) {
		t.Fatalf("yesterday is not sealed after Seal")
	}
	check("from day rows")
	clock.Set(today.Add(4 * 24 * time.Hour))
	if err := a.ApplyRetention(); err != nil {
		t.Fatalf("ApplyRetention: %v", err)
	}
	check("after the hour tier expired")
}
