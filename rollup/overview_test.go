package rollup

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/waymark/waymark/rollup/query"
)

// overviewClicks is the hand-made click history of TestLinkOverview. The
// clock is Monday 2026-11-30 12:00 UTC, 07:00 in New York (EST, UTC-5
// since November 1; EDT, UTC-4, before). Each click says which New York
// window it is in. hash is the visitor hash.
var overviewClicks = []struct {
	at   string
	hash uint64
	bot  bool
}{
	// today, Nov 30 New York (from 05:00 UTC): 3 clicks, visitors {1, 2}
	{"2026-11-30T05:30:00Z", 1, false}, // 00:30 NY
	{"2026-11-30T09:10:00Z", 2, false}, // 04:10 NY
	{"2026-11-30T11:59:00Z", 1, false}, // 06:59 NY: the last click
	{"2026-11-30T11:59:30Z", 9, true},  // a bot: counted nowhere
	// yesterday, Nov 29 NY: 4 clicks, visitors {3, 4, 5}
	{"2026-11-30T04:59:00Z", 3, false}, // 23:59 NY on the 29th
	{"2026-11-29T14:00:00Z", 3, false}, // 09:00 NY
	{"2026-11-29T15:00:00Z", 4, false}, // 10:00 NY
	{"2026-11-29T20:00:00Z", 5, false}, // 15:00 NY
	// the rest of the last 7 days (Nov 23..29 NY): 3 more
	{"2026-11-25T14:20:00Z", 6, false}, // 09:20 NY
	{"2026-11-25T14:20:01Z", 7, false}, // 09:20 NY
	{"2026-11-23T05:00:00Z", 6, false}, // 00:00 NY, the window's first instant
	// the 7 days before (Nov 16..22 NY): 6
	{"2026-11-23T04:59:00Z", 8, false}, // 23:59 NY on the 22nd
	{"2026-11-18T14:00:00Z", 8, false}, // 09:00 NY
	{"2026-11-18T14:00:01Z", 10, false},
	{"2026-11-18T14:00:02Z", 11, false},
	{"2026-11-20T14:00:00Z", 8, false},  // 09:00 NY
	{"2026-11-16T05:00:00Z", 12, false}, // 00:00 NY on the 16th
	// the rest of the last 30 days (Oct 31..Nov 29 NY): 4 more
	{"2026-11-16T04:00:00Z", 13, false}, // 23:00 NY on the 15th
	{"2026-11-05T14:00:00Z", 13, false}, // 09:00 NY
	{"2026-11-05T14:00:01Z", 14, false},
	{"2026-10-31T04:30:00Z", 15, false}, // 00:30 EDT on the 31st: day rows only (past the hour tier)
	// older: all-time only
	{"2026-10-30T12:00:00Z", 16, false},
	{"2026-10-01T12:00:00Z", 17, false},
}

func shipOverviewClicks(t *testing.T, a *Aggregator, code string) {
	t.Helper()
	// One segment per click: a segment spans seconds of its edge's
	// traffic, which the raw scan for the last click relies on.
	var segs [][]byte
	for i, c := range overviewClicks {
		at, err := time.Parse(time.RFC3339, c.at)
		if err != nil {
			t.Fatal(err)
		}
		ev := click("ovw", i+1, code, at, c.bot)
		ev.VisitorHash = c.hash
		segs = append(segs, segmentBytes("edge-ovw", uint64(i+1), ev))
	}
	startServer(t, a).ship(t, segs...)
}

// TestLinkOverview checks every number of the overview against the
// clicks above, counted by hand per New York window.
func TestLinkOverview(t *testing.T) {
	clock := &testClock{now: base}
	a := openTest(t, testConfig(t, t.TempDir(), clock))
	shipOverviewClicks(t, a, "ovw1")
	ny := mustLoc(t, "America/New_York")
	o, err := a.LinkOverview("ovw1", ny)
	if err != nil {
		t.Fatalf("LinkOverview: %v", err)
	}
	nyDay := func(d int) time.Time { return time.Date(2026, 11, d, 0, 0, 0, 0, ny) }
	for _, w := range []struct {
		name     string
		got      query.OverviewWindow
		from, to time.Time
		clicks   int64
		uniques  uint64
		coarse   bool
	}{
		{"today", o.Today, nyDay(30), base, 3, 2, false},
		{"yesterday", o.Yesterday, nyDay(29), nyDay(30), 4, 3, false},
		{"last 7 days", o.Last7Days, nyDay(23), nyDay(30), 7, 5, false},         // {3,4,5,6,7}
		{"previous 7 days", o.Previous7Days, nyDay(16), nyDay(23), 6, 4, false}, // {8,10,11,12}
		// {3..8, 10..15}; Oct 31 starts before the hour tier: read at whole days.
		{"last 30 days", o.Last30Days, time.Date(2026, 10, 31, 0, 0, 0, 0, ny), nyDay(30), 17, 12, true},
	} {
		if !w.got.From.Equal(w.from) || !w.got.To.Equal(w.to) {
			t.Errorf("%s: window %v..%v; want %v..%v", w.name, w.got.From, w.got.To, w.from, w.to)
		}
		wantEqual(t, w.name+" clicks", w.got.Clicks, w.clicks)
		wantEqual(t, w.name+" unique visitors", w.got.UniqueVisitors, w.uniques)
		wantEqual(t, w.name+" coarse", w.got.Coarse, w.coarse)
	}
	wantEqual(t, "all-time clicks", o.AllTimeClicks, 22) // every click above but the bot
	wantGrowth(t, "daily growth", o.DailyGrowth, -25.0)  // (3 - 4) / 4
	wantGrowth(t, "weekly growth", o.WeeklyGrowth, 16.7) // (7 - 6) / 6 = 16.67
	if want := time.Date(2026, 11, 30, 11, 59, 0, 0, time.UTC); o.LastClick == nil || !o.LastClick.Equal(want) {
		t.Errorf("last click: got %v; want %v (the bot at 11:59:30 does not count)", o.LastClick, want)
	}
	// 09:00 NY: Nov 29, Nov 25 x2, Nov 18 x3, Nov 20, Nov 5 x2 = 9 (00:00
	// and 23:00 have 3 each). Oct 31 04:30 UTC is before the 720 hours.
	if o.PeakHour == nil || o.PeakHour.Hour != 9 || o.PeakHour.Clicks != 9 {
		t.Errorf("peak hour: got %+v; want 9 h with 9 clicks", o.PeakHour)
	} else if want := base.Add(-719 * time.Hour).Truncate(time.Hour); !o.PeakHour.From.Equal(want) || !o.PeakHour.To.Equal(base.Add(time.Hour)) {
		t.Errorf("peak hour window: %v..%v; want %v..%v", o.PeakHour.From, o.PeakHour.To, want, base.Add(time.Hour))
	}

	// In UTC the same clicks peak at 14 h, and the days move.
	u, err := a.LinkOverview("ovw1", time.UTC)
	if err != nil {
		t.Fatalf("LinkOverview(UTC): %v", err)
	}
	if u.PeakHour == nil || u.PeakHour.Hour != 14 || u.PeakHour.Clicks != 9 {
		t.Errorf("UTC peak hour: got %+v; want 14 h with 9 clicks", u.PeakHour)
	}
	wantEqual(t, "UTC today", u.Today.Clicks, 4)         // from 00:00 UTC: 04:59, 05:30, 09:10, 11:59
	wantEqual(t, "UTC yesterday", u.Yesterday.Clicks, 3) // 14:00, 15:00, 20:00
	wantGrowth(t, "UTC daily growth", u.DailyGrowth, 33.3)
}

// TestLinkOverviewEmpty: a link without clicks has zeros, no growth, no
// last click and no peak hour (nulls in the JSON).
func TestLinkOverviewEmpty(t *testing.T) {
	a := openTest(t, testConfig(t, t.TempDir(), &testClock{now: base}))
	o, err := a.LinkOverview("nothing", time.UTC)
	if err != nil {
		t.Fatalf("LinkOverview: %v", err)
	}
	b, _ := json.Marshal(o)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"daily_growth", "weekly_growth", "last_click", "peak_hour"} {
		if v, ok := m[k]; !ok || v != nil {
			t.Errorf("%s: got %v (present %v); want null", k, v, ok)
		}
	}
	if m["all_time_clicks"] != 0.0 || o.Today.Clicks != 0 || o.Last30Days.Clicks != 0 {
		t.Errorf("empty link: %s", b)
	}
}

// TestLinkOverviewLastClickOlderHour: the newest hour row with clicks may
// hold only a click after now (an edge clock ahead); the last click is
// then found in the hour before.
func TestLinkOverviewLastClickOlderHour(t *testing.T) {
	clock := &testClock{now: base}
	a := openTest(t, testConfig(t, t.TempDir(), clock))
	early := click("lc", 1, "lc1", base.Add(-2*time.Hour-10*time.Minute), false) // 09:50
	ahead := click("lc", 2, "lc1", base.Add(20*time.Minute), false)              // 12:20, after now
	startServer(t, a).ship(t, segmentBytes("edge-1", 1, early), segmentBytes("edge-1", 2, ahead))
	o, err := a.LinkOverview("lc1", time.UTC)
	if err != nil {
		t.Fatalf("LinkOverview: %v", err)
	}
	if want := time.UnixMilli(early.Time).UTC(); o.LastClick == nil || !o.LastClick.Equal(want) {
		t.Errorf("last click: got %v; want %v", o.LastClick, want)
	}
}

func wantGrowth(t *testing.T, what string, got *float64, want float64) {
	t.Helper()
	if got == nil || *got != want {
		t.Errorf("%s: got %v; want %v", what, fmtPtr(got), want)
	}
}

func fmtPtr(p *float64) any {
	if p == nil {
		return "null"
	}
	return *p
}
