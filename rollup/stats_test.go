package rollup

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
	"github.com/waymark/waymark/store"
)

// feedWorld ships the generated world through the real receive path,
// restarting the aggregator half way and resending everything at the end
// (duplicates must change nothing). It returns the running aggregator.
func feedWorld(t *testing.T, w *genWorld) (*Aggregator, Config) {
	t.Helper()
	clock := &testClock{now: base}
	cfg := testConfig(t, t.TempDir(), clock)
	a, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	srv := startServer(t, a)
	segs := w.Segments("edge-1", 97)
	half := len(segs) / 2
	for _, s := range segs[:half] {
		srv.ship(t, s)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	a, err = Open(cfg)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	srv.agg.Store(a)
	for i := half; i < len(segs); i += 3 {
		srv.ship(t, segs[i:min(i+3, len(segs))]...)
	}
	srv.ship(t, segs[:5]...) // retries of applied segments
	// Some tests call the query engines below the exported methods, which
	// do not write pending rollups themselves.
	if err := a.catchUp(); err != nil {
		t.Fatalf("catchUp: %v", err)
	}
	return a, cfg
}

func checkSite(t *testing.T, a *Aggregator, w *genWorld, r query.Range) {
	t.Helper()
	ref := w.RefSite(r.From, r.To)
	got, err := a.SiteAggregate(genSite, r, nil)
	if err != nil {
		t.Fatalf("SiteAggregate: %v", err)
	}
	want := ref.Metrics()
	wantEstimate(t, "visitors", got.Visitors, ref.Visitors)
	got.Visitors = 0
	// Plausible divides engaged time and scroll by the visits with an
	// engagement event in the range; rollups count a visit's engagement in
	// the hour of its first one, so a visit engaged on both sides of the
	// range's start counts outside it (rollup/DESIGN.md). Within 2 %.
	if math.Abs(got.TimeOnPage-want.TimeOnPage) > 0.02*want.TimeOnPage+1 ||
		math.Abs(got.ScrollDepth-want.ScrollDepth) > 0.02*want.ScrollDepth+1 {
		t.Errorf("time on page %v, scroll %v; want %v, %v within 2 %%", got.TimeOnPage, got.ScrollDepth, want.TimeOnPage, want.ScrollDepth)
	}
	got.TimeOnPage, got.ScrollDepth = want.TimeOnPage, want.ScrollDepth
	if got != want {
		t.Errorf("site aggregate %v..%v:\n got %+v\nwant %+v", r.From, r.To, got, want)
	}
	pages, err := a.SiteBreakdown(genSite, "page", r, 100, nil)
	if err != nil {
		t.Fatalf("SiteBreakdown: %v", err)
	}
	wantEqual(t, "pages", len(pages.Results), len(ref.PagePV))
	for _, row := range pages.Results {
		wantEqual(t, "pageviews of "+row.Value, row.Pageviews, ref.PagePV[row.Value])
		wantEstimate(t, "visitors of "+row.Value, row.Visitors, int64(len(ref.PageVisitors[row.Value])))
	}
	for dim, m := range map[string]map[string]int64{
		"country": ref.CountryVisit, "entry_page": ref.EntryVisits, "exit_page": ref.ExitVisits, "source": ref.SourceVisits,
	} {
		bd, err := a.SiteBreakdown(genSite, dim, r, 100, nil)
		if err != nil {
			t.Fatalf("SiteBreakdown(%s): %v", dim, err)
		}
		wantEqual(t, dim+" values", len(bd.Results), len(m))
		for _, row := range bd.Results {
			wantEqual(t, dim+" visits of "+row.Value, row.Visits, m[row.Value])
		}
	}
}

func checkLink(t *testing.T, a *Aggregator, w *genWorld, r query.Range) {
	t.Helper()
	clicks, bots, uniques, byCountry := w.RefClicks(r.From, r.To)
	st, err := a.LinkStats(genCode, r, query.Day)
	if err != nil {
		t.Fatalf("LinkStats: %v", err)
	}
	wantEqual(t, "clicks", st.Totals.Clicks, clicks)
	wantEqual(t, "bot clicks", st.Totals.BotClicks, bots)
	wantEstimate(t, "unique visitors", st.Totals.UniqueVisitors, uniques)
	var sum int64
	for _, p := range st.Series {
		c, _, u, _ := w.RefClicks(p.T, nextDay(p.T, r))
		wantEqual(t, "clicks on "+p.T.String(), p.Clicks, c)
		wantEstimate(t, "uniques on "+p.T.String(), p.UniqueVisitors, u)
		sum += p.Clicks
	}
	wantEqual(t, "series sum", sum, clicks)
	bd, err := a.LinkBreakdown(genCode, "country", r, 3)
	if err != nil {
		t.Fatalf("LinkBreakdown: %v", err)
	}
	var shown int64
	for _, row := range bd.Results {
		wantEqual(t, "clicks from "+row.Value, row.Clicks, byCountry[row.Value])
		shown += row.Clicks
	}
	wantEqual(t, "breakdown total", bd.Total, clicks)
	wantEqual(t, "breakdown other", bd.Other, clicks-shown)
}

// nextDay is the end of the day bucket starting at t, clipped to r.
func nextDay(t time.Time, r query.Range) time.Time {
	l := t.In(r.Location())
	end := time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, r.Location()).AddDate(0, 0, 1)
	if end.After(r.To) {
		return r.To
	}
	return end
}

func worldRanges(t *testing.T) []query.Range {
	ny := mustLoc(t, genTZ)
	return []query.Range{
		{From: base.Add(-72 * time.Hour), To: base.Add(24 * time.Hour), Loc: time.UTC},
		// Local days in New York: the seam between UTC day rows and hour rows.
		{From: time.Date(2026, 11, 28, 0, 0, 0, 0, ny), To: time.Date(2026, 11, 30, 0, 0, 0, 0, ny), Loc: ny},
		{From: base.Add(-30 * time.Hour), To: base.Add(-5 * time.Hour), Loc: ny},
	}
}

// TestStatsMatchReference feeds a generated stream (with a restart half
// way and resent segments) and compares every metric with the reference
// computed from the raw events.
func TestStatsMatchReference(t *testing.T) {
	w := generate(1)
	a, _ := feedWorld(t, w)
	for _, r := range worldRanges(t) {
		checkSite(t, a, w, r)
		checkLink(t, a, w, r)
	}
	if got := a.rm.eventsLate.Get(); got != uint64(len(w.Late)) {
		t.Errorf("late events: got %d; want %d", got, len(w.Late))
	}
	wantCount(t, a, Filter{}, uint64(len(w.Events))) // late ones are folded too
}

// snapshotRollups returns every rollup row and sketch, key and value.
func snapshotRollups(t *testing.T, a *Aggregator) []byte {
	t.Helper()
	var out []byte
	for _, tab := range []byte{tabRows, tabSketch} {
		it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tab}, UpperBound: []byte{tab + 1}})
		if err != nil {
			t.Fatalf("NewIter: %v", err)
		}
		for it.First(); it.Valid(); it.Next() {
			out = append(out, it.Key()...)
			out = append(out, 0xff)
			out = append(out, it.Value()...)
			out = append(out, 0xfe)
		}
		it.Close()
	}
	return out
}

func TestRebuildIdenticalAndRepeatable(t *testing.T) {
	w := generate(2)
	a, _ := feedWorld(t, w)
	from, to := base.Add(-72*time.Hour), base.Add(24*time.Hour)
	clicksBefore, _ := a.LinkClicks(genCode)
	if err := a.Rebuild(from, to); err != nil {
		t.Fatalf("Rebuild: %v", err)
	}
	first := snapshotRollups(t, a)
	if err := a.Rebuild(from, to); err != nil {
		t.Fatalf("second Rebuild: %v", err)
	}
	if second := snapshotRollups(t, a); !bytes.Equal(first, second) {
		t.Errorf("rebuilding twice: rollups differ (%d and %d bytes)", len(first), len(second))
	}
	clicksAfter, _ := a.LinkClicks(genCode)
	wantEqual(t, "all-time clicks after rebuild", clicksAfter, clicksBefore)
	for _, r := range worldRanges(t) {
		checkSite(t, a, w, r)
		checkLink(t, a, w, r)
	}
}

// TestTodaySeamNonUTC: late evening in New York is already the next UTC
// day. Today's local bucket combines the UTC day rows and hour rows, and a
// just-shipped event shows at once.
func TestTodaySeamNonUTC(t *testing.T) {
	ny := mustLoc(t, genTZ)
	now := time.Date(2026, 11, 30, 3, 30, 0, 0, time.UTC) // 22:30 on the 29th in New York
	clock := &testClock{now: now}
	a := openTest(t, testConfig(t, t.TempDir(), clock))
	srv := startServer(t, a)
	srv.ship(t, segmentBytes("edge-1", 1,
		click("s", 1, "abc", time.Date(2026, 11, 29, 5, 30, 0, 0, time.UTC), false),  // 00:30 NY on the 29th
		click("s", 2, "abc", time.Date(2026, 11, 29, 4, 59, 0, 0, time.UTC), false),  // 23:59 NY on the 28th
		click("s", 3, "abc", time.Date(2026, 11, 29, 23, 10, 0, 0, time.UTC), false), // 18:10 NY on the 29th
		click("s", 4, "abc", time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC), false),   // 21:00 NY on the 29th
	))
	r := query.Range{From: time.Date(2026, 11, 28, 0, 0, 0, 0, ny), To: time.Date(2026, 11, 30, 0, 0, 0, 0, ny), Loc: ny}
	series := func() []int64 {
		st, err := a.LinkStats("abc", r, query.Day)
		if err != nil {
			t.Fatalf("LinkStats: %v", err)
		}
		var out []int64
		for _, p := range st.Series {
			out = append(out, p.Clicks)
		}
		return out
	}
	if got := series(); len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Fatalf("NY days: got %v; want [1 3]", got)
	}
	// A click a moment ago lands in today's bucket as soon as it is shipped.
	srv.ship(t, segmentBytes("edge-1", 2, click("s", 5, "abc", now.Add(-time.Second), false)))
	if got := series(); got[1] != 4 {
		t.Errorf("today after a fresh click: got %d; want 4", got[1])
	}
	rt, err := a.LinkRealtime("abc", 10)
	if err != nil {
		t.Fatalf("LinkRealtime: %v", err)
	}
	if rt.LastMinute != 1 || rt.Last5Minutes != 1 || rt.LastHour != 1 || len(rt.Recent) != 1 {
		t.Errorf("realtime: got %+v; want 1, 1, 1 and one recent click", rt)
	}
}

func TestClickLimitFiresOnce(t *testing.T) {
	clock := &testClock{now: base}
	cfg := testConfig(t, t.TempDir(), clock)
	fired := make(chan string, 10)
	cfg.Links = func(code string) (store.Link, bool) {
		return store.Link{Code: code, ClickLimit: 100}, code == "lim"
	}
	cfg.OnClickLimit = func(code string) { fired <- code }
	a := openTest(t, cfg)
	srv := startServer(t, a)
	for s := range 15 {
		var evs []ingest.Event
		for i := range 10 {
			evs = append(evs, click("l", s*10+i, "lim", base.Add(-time.Minute), false))
		}
		evs = append(evs, click("lb", s, "lim", base.Add(-time.Minute), true)) // bots never count
		srv.ship(t, segmentBytes("edge-1", uint64(s+1), evs...))
		n, err := a.LinkClicks("lim")
		if err != nil {
			t.Fatalf("LinkClicks: %v", err)
		}
		if n < 100 && len(fired) > 0 {
			t.Fatalf("limit fired at %d clicks; want at 100", n)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(fired) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := <-fired; got != "lim" {
		t.Errorf("fired for %q; want lim", got)
	}
	select {
	case c := <-fired:
		t.Errorf("fired again for %q; want once", c)
	case <-time.After(50 * time.Millisecond):
	}
	if n, _ := a.LinkClicks("lim"); n != 150 {
		t.Errorf("all-time clicks: got %d; want 150", n)
	}
}

// TestVisitAcrossMidnight: one visitor (same hash) from 23:50 to 00:20 UTC
// is one visit, counted in the hour it started.
func TestVisitAcrossMidnight(t *testing.T) {
	a := openTest(t, testConfig(t, t.TempDir(), &testClock{now: base}))
	srv := startServer(t, a)
	mid := base.Truncate(24 * time.Hour)
	var evs []ingest.Event
	for i, off := range []time.Duration{-10 * time.Minute, 5 * time.Minute, 20 * time.Minute} {
		ev := pageview("m", i, "s1", mid.Add(off), false)
		ev.VisitorHash = 42 // the day's hash; after midnight a new one, and the old one as previous
		if off > 0 {
			ev.VisitorHash, ev.PrevVisitorHash = 43, 42
		}
		evs = append(evs, ev)
	}
	// Shipped in reverse order: the visit must come out the same.
	srv.ship(t, segmentBytes("edge-1", 1, evs[2]), segmentBytes("edge-1", 2, evs[1]), segmentBytes("edge-1", 3, evs[0]))
	m, err := a.SiteAggregate("s1", query.Range{From: mid.Add(-time.Hour), To: mid.Add(time.Hour)}, nil)
	if err != nil {
		t.Fatalf("SiteAggregate: %v", err)
	}
	if m.Visits != 1 || m.Pageviews != 3 || m.BounceRate != 0 || m.VisitDuration != 1800 || m.ViewsPerVisit != 3 {
		t.Errorf("got %+v; want 1 visit, 3 pageviews, bounce 0, 1800 s, 3 per visit", m)
	}
	after, err := a.SiteAggregate("s1", query.Range{From: mid, To: mid.Add(time.Hour)}, nil)
	if err != nil {
		t.Fatalf("SiteAggregate: %v", err)
	}
	// Plausible counts a session in every range it overlaps: the visit
	// counts after midnight too.
	if after.Visits != 1 || after.Pageviews != 2 {
		t.Errorf("after midnight: got %d visits, %d pageviews; want 1 and 2", after.Visits, after.Pageviews)
	}
}
