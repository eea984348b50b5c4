package rollup

import (
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
)

func TestRetentionDropsWholeDays(t *testing.T) {
	clock := &testClock{now: base}
	cfg := testConfig(t, t.TempDir(), clock)
	cfg.Retention = 48 * time.Hour
	a := openTest(t, cfg)
	srv := startServer(t, a)
	day := 24 * time.Hour

	// Events on the three days retention keeps at base (D-2, D-1, D), and
	// one on D+1 (early morning, within the future slack).
	early := base.Add(-2*day - 11*time.Hour) // 01:00 on D-2
	srv.ship(t,
		segmentBytes("edge-1", 1,
			click("r", 1, "abc", early, false),
			click("r", 2, "abc", early.Add(22*time.Hour), true), // 23:00 on D-2
			click("r", 3, "xyz", base.Add(-day), false),
			pageview("r", 4, "s1", base.Add(-day), false)),
		segmentBytes("edge-1", 2,
			click("r", 5, "abc", base, false),
			click("r", 6, "abc", base.Add(14*time.Hour), false)), // 02:00 on D+1
	)
	wantCount(t, a, Filter{}, 6)
	if err := a.ApplyRetention(); err != nil {
		t.Fatalf("ApplyRetention: %v", err)
	}
	wantCount(t, a, Filter{}, 6)
	if got := a.m.rawDays.Get(); got != 4 {
		t.Errorf("raw days: got %v; want 4", got)
	}

	// A day later, D-2 is older than 48 h as a whole: both its events go,
	// even the one from 23:00 that is only 37 h old, never half a day.
	clock.Set(base.Add(day))
	if err := a.ApplyRetention(); err != nil {
		t.Fatalf("ApplyRetention: %v", err)
	}
	wantCount(t, a, Filter{}, 4)
	wantCount(t, a, Filter{Code: "abc"}, 2)
	wantCount(t, a, Filter{BotsOnly: true}, 0)
	wantCount(t, a, Filter{Code: "abc", BotsOnly: true}, 0)
	wantCount(t, a, Filter{Code: "xyz"}, 1)
	wantCount(t, a, Filter{SiteID: "s1"}, 1)
	if got := a.m.rawDays.Get(); got != 3 {
		t.Errorf("raw days: got %v; want 3", got)
	}
	if got := a.m.daysDropped.Get(); got != 1 {
		t.Errorf("days dropped: got %d; want 1", got)
	}
	evs, err := a.Tail(10, Filter{})
	if err != nil || len(evs) != 4 || evs[0].ID != eventID("r", 3) {
		t.Errorf("Tail after retention: got %d events (err %v); want 4 starting with r3", len(evs), err)
	}

	// Counts survive a restart after retention.
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	b := openTest(t, cfg)
	srv.agg.Store(b)
	wantCount(t, b, Filter{Code: "abc"}, 2)

	// Two more days: the segments' records (received on D) are gone with
	// D, yet sending them again counts nothing twice: D's events are too
	// old to store and D+1's are found by the dedup index.
	clock.Set(base.Add(3 * day))
	if err := b.ApplyRetention(); err != nil {
		t.Fatalf("ApplyRetention: %v", err)
	}
	wantCount(t, b, Filter{}, 1)
	if ok, err := has(b.db, segmentKey(ingest.SegmentRef{Node: "edge-1", Seq: 2})); err != nil || ok {
		t.Errorf("segment record after retention: got %v (err %v); want gone", ok, err)
	}
	srv.ship(t, segmentBytes("edge-1", 2,
		click("r", 5, "abc", base, false),
		click("r", 6, "abc", base.Add(14*time.Hour), false)))
	wantCount(t, b, Filter{}, 1)
	wantCount(t, b, Filter{Code: "abc"}, 1)

	// Everything expires: the totals are gone, not negative.
	clock.Set(base.Add(30 * day))
	if err := b.ApplyRetention(); err != nil {
		t.Fatalf("ApplyRetention: %v", err)
	}
	for _, f := range []Filter{{}, {Code: "abc"}, {SiteID: "s1"}, {BotsOnly: true}} {
		wantCount(t, b, f, 0)
	}
	if got := b.m.rawDays.Get(); got != 0 {
		t.Errorf("raw days: got %v; want 0", got)
	}
}
