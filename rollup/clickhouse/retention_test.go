package clickhouse

import (
	"reflect"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
)

// Drop tallies are stored once with their segment, whatever the retries,
// and answered per scope, name and hour.
func TestDropTalliesCountOnce(t *testing.T) {
	c := newClient(t, sharedServer(t))
	b := newTestBackend(t, c, dec1.AddDate(0, 0, 2))
	h := dec1.Add(10*time.Hour).Unix() / 3600
	evs := []ingest.Event{click("k1", at(0, 10, 5, 0, 0), 1, false)}
	evs[0].ID[0] = 1
	raw := ingest.BuildSegmentParts(ingest.SegmentRef{Node: "e1", Inc: 1, Seq: 1}, dec1, evs, []ingest.DropTally{
		{Scope: ingest.ScopeLink, Name: "k1", Hour: h, Count: 3},
		{Scope: ingest.ScopeSite, Name: "s1", Hour: h, Count: 2},
		{Scope: ingest.ScopeLink, Name: "k1", Hour: h + 30, Count: 4}, // the next day
	})
	mustStore(t, b, raw, Stored)
	if err := c.Exec(testCtx(t), "TRUNCATE TABLE segments"); err != nil { // as if the identity never got in
		t.Fatal(err)
	}
	mustStore(t, b, raw, Stored)
	mustStore(t, b, raw, Duplicate)
	for _, x := range []struct {
		scope ingest.Scope
		name  string
		r     query.Range
		want  int64
	}{
		{ingest.ScopeLink, "k1", dayRange(0, 1), 3},
		{ingest.ScopeLink, "k1", dayRange(0, 2), 7},
		{ingest.ScopeSite, "s1", dayRange(0, 1), 2},
		{ingest.ScopeSite, "k1", dayRange(0, 1), 0},
		// The hour 10:00 is touched by a range ending at 10:00:01.
		{ingest.ScopeLink, "k1", query.Range{From: dec1.Add(9 * time.Hour), To: dec1.Add(10*time.Hour + time.Second)}, 3},
		{ingest.ScopeLink, "k1", query.Range{From: dec1.Add(11 * time.Hour), To: dec1.Add(12 * time.Hour)}, 0},
	} {
		got, err := b.DroppedEvents(x.scope, x.name, x.r)
		if err != nil {
			t.Fatal(err)
		}
		if got != x.want {
			t.Errorf("dropped %d %s over %v-%v: %d; want %d", x.scope, x.name, x.r.From, x.r.To, got, x.want)
		}
	}
	ls, err := b.LinkStats("k1", dayRange(0, 1), query.Day)
	if err != nil {
		t.Fatal(err)
	}
	if ls.DroppedEvents != 3 || ls.Totals.Clicks != 1 {
		t.Errorf("link stats: %d clicks, %d dropped; want 1 and 3", ls.Totals.Clicks, ls.DroppedEvents)
	}
}

// Retention drops whole days older than Retention (events and tallies)
// and keeps their clicks in all-time clicks.
func TestRetentionDropsOldDays(t *testing.T) {
	c := newClient(t, sharedServer(t))
	now := dec1.AddDate(0, 0, 2).Add(12 * time.Hour)
	b := NewBackend(c, BackendConfig{Now: func() time.Time { return now }, Retention: 36 * time.Hour})
	// Day 0: 2 clicks and a bot click of k1, a pageview, a tally;
	// day 1: a click; day 2: a click. now - 36 h is day 1 00:00.
	evs := []ingest.Event{
		click("k1", at(0, 1, 0, 0, 0), 1, false),
		click("k1", at(0, 2, 0, 0, 0), 2, false),
		click("k1", at(0, 3, 0, 0, 0), 3, true),
		pageview("s1", "/", at(0, 4, 0, 0, 0), 4, 0),
		click("k1", at(1, 1, 0, 0, 0), 1, false),
		click("k1", at(2, 1, 0, 0, 0), 1, false),
	}
	for i := range evs {
		evs[i].ID[0] = byte(i + 1)
	}
	raw := ingest.BuildSegmentParts(ingest.SegmentRef{Node: "e1", Inc: 1, Seq: 1}, dec1, evs, []ingest.DropTally{
		{Scope: ingest.ScopeLink, Name: "k1", Hour: dec1.Unix() / 3600, Count: 5},
	})
	mustStore(t, b, raw, Stored)
	ov, err := b.LinkOverview("k1", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if ov.AllTimeClicks != 4 {
		t.Fatalf("all-time clicks before retention: %d; want 4", ov.AllTimeClicks)
	}
	days, err := b.ApplyRetention(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(days, []uint32{20251201}) {
		t.Errorf("dropped days %v; want [20251201]", days)
	}
	for range 2 { // a second run drops nothing and changes nothing
		ls, err := b.LinkStats("k1", dayRange(0, 3), query.Day)
		if err != nil {
			t.Fatal(err)
		}
		if ls.Totals.Clicks != 2 || ls.Totals.BotClicks != 0 || ls.Series[0].Clicks != 0 || ls.DroppedEvents != 0 {
			t.Errorf("after retention: %d clicks, %d bot, day 0 %d, dropped %d; want 2, 0, 0, 0",
				ls.Totals.Clicks, ls.Totals.BotClicks, ls.Series[0].Clicks, ls.DroppedEvents)
		}
		ov, err := b.LinkOverview("k1", time.UTC)
		if err != nil {
			t.Fatal(err)
		}
		if ov.AllTimeClicks != 4 {
			t.Errorf("all-time clicks after retention: %d; want 4", ov.AllTimeClicks)
		}
		start, err := b.SiteStatsStart("s1")
		if err != nil {
			t.Fatal(err)
		}
		if !start.IsZero() {
			t.Errorf("stats start after the only site day went: %v; want none", start)
		}
		if days, err = b.ApplyRetention(testCtx(t)); err != nil || len(days) != 0 {
			t.Errorf("second retention: %v, %v; want nothing dropped", days, err)
		}
	}
}
