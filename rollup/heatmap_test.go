package rollup

import (
	"strings"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
)

// heatmapEvents is TestSiteHeatmap's site traffic, in UTC; the site is in
// Berlin (CET, UTC+1). The clock is Monday 2026-11-30 12:00 UTC, so 7d is
// Nov 23..29 Berlin: [Nov 22 23:00 UTC, Nov 29 23:00 UTC). Cells are
// weekday (0 = Monday) and Berlin hour.
var heatmapEvents = []struct {
	at     string
	hash   uint64
	kind   ingest.Kind
	path   string
	bot    bool
	inside string // the cell it counts in (7d), for the reader
}{
	// V1: Wednesday 10 h, two pageviews, one visit.
	{"2026-11-25T09:10:00Z", 1, ingest.KindPageview, "/", false, "Wed 10"},
	{"2026-11-25T09:20:00Z", 1, ingest.KindPageview, "/pricing", false, "Wed 10"},
	{"2026-11-25T09:15:00Z", 99, ingest.KindPageview, "/", true, "a bot: nowhere"},
	// V2: Saturday 19:50 to 20:30: active in 19 h and 20 h.
	{"2026-11-28T18:50:00Z", 2, ingest.KindPageview, "/", false, "Sat 19"},
	{"2026-11-28T19:05:00Z", 2, ingest.KindPageview, "/docs", false, "Sat 20"},
	{"2026-11-28T19:30:00Z", 2, ingest.KindCustom, "/docs", false, "Sat 20 (an event, no pageview)"},
	// V3: Sunday 23:40 to Monday 00:10: the range ends at Monday 00:00, so
	// the visit counts in Sun 23 (still going at the end) and its second
	// pageview not at all.
	{"2026-11-29T22:40:00Z", 3, ingest.KindPageview, "/", false, "Sun 23"},
	{"2026-11-29T23:10:00Z", 3, ingest.KindPageview, "/blog", false, "after the range"},
	// V4: Monday 00:30. V5 started Sunday 23:50, before the range, and
	// went on into Monday 00:05: it counts in Mon 00 with that pageview.
	{"2026-11-22T23:30:00Z", 4, ingest.KindPageview, "/", false, "Mon 00"},
	{"2026-11-22T22:50:00Z", 5, ingest.KindPageview, "/", false, "before the 7d range; Sun 23 in 30d"},
	{"2026-11-22T23:05:00Z", 5, ingest.KindPageview, "/about", false, "Mon 00"},
	// V7: the Wednesday before, 10:40 Berlin: in 30d only.
	{"2026-11-18T09:40:00Z", 7, ingest.KindPageview, "/", false, "Wed 10 (30d)"},
	// V8: Saturday Oct 31 11:00 Berlin: inside 30d (Oct 31..Nov 29) but
	// older than the hour tier when it arrived, so no hour row holds it.
	{"2026-10-31T10:00:00Z", 8, ingest.KindPageview, "/", false, "nowhere (past the hour tier)"},
}

func shipHeatmapEvents(t *testing.T, a *Aggregator, site string) {
	t.Helper()
	var segs [][]byte
	for i, e := range heatmapEvents {
		at, err := time.Parse(time.RFC3339, e.at)
		if err != nil {
			t.Fatal(err)
		}
		ev := pageview("heat", i+1, site, at, e.bot)
		ev.Kind, ev.Path, ev.VisitorHash, ev.Props = e.kind, e.path, e.hash, nil
		if e.kind == ingest.KindCustom {
			ev.Name = "signup"
		}
		segs = append(segs, segmentBytes("edge-heat", uint64(i+1), ev))
	}
	startServer(t, a).ship(t, segs...)
}

type cell struct{ wd, hr int }

func TestSiteHeatmap(t *testing.T) {
	a := openTest(t, testConfig(t, t.TempDir(), &testClock{now: base}))
	shipHeatmapEvents(t, a, "site-heat")
	berlin := mustLoc(t, "Europe/Berlin")

	week, err := query.PeriodRange("7d", base, berlin)
	if err != nil {
		t.Fatal(err)
	}
	h, err := a.SiteHeatmap("site-heat", week)
	if err != nil {
		t.Fatalf("SiteHeatmap: %v", err)
	}
	const mon, wed, sat, sun = 0, 2, 5, 6
	checkHeatmap(t, "7d", h,
		map[cell]int64{{wed, 10}: 2, {sat, 19}: 1, {sat, 20}: 1, {sun, 23}: 1, {mon, 0}: 2},
		map[cell]int64{{wed, 10}: 1, {sat, 19}: 1, {sat, 20}: 1, {sun, 23}: 1, {mon, 0}: 2})
	wantEqual(t, "7d total pageviews", h.Total.Pageviews, 7)
	wantEqual(t, "7d total visits", h.Total.Visits, 6)
	wantEqual(t, "7d max pageviews", h.Max.Pageviews, 2)
	wantEqual(t, "7d max visits", h.Max.Visits, 2)
	wantEqual(t, "7d clipped", h.Clipped, false)
	wantEqual(t, "weekdays", strings.Join(h.Weekdays[:], ","), "Monday,Tuesday,Wednesday,Thursday,Friday,Saturday,Sunday")
	if want := time.Date(2026, 11, 23, 0, 0, 0, 0, berlin); !h.HoursFrom.Equal(want) {
		t.Errorf("7d hours from %v; want %v", h.HoursFrom, want)
	}

	// 30d reaches past the hour tier (kept 30 days: from Oct 31 12:00
	// UTC, 13:00 Berlin): clipped there. V7 adds to Wed 10, and V5's
	// first pageview (Sunday Nov 22, 23:50) is inside now: V5 is active
	// in Sun 23 as well. The second pageview of V3 is still after the
	// range.
	month, err := query.PeriodRange("30d", base, berlin)
	if err != nil {
		t.Fatal(err)
	}
	h, err = a.SiteHeatmap("site-heat", month)
	if err != nil {
		t.Fatalf("SiteHeatmap: %v", err)
	}
	checkHeatmap(t, "30d", h,
		map[cell]int64{{wed, 10}: 3, {sat, 19}: 1, {sat, 20}: 1, {sun, 23}: 2, {mon, 0}: 2},
		map[cell]int64{{wed, 10}: 2, {sat, 19}: 1, {sat, 20}: 1, {sun, 23}: 2, {mon, 0}: 2})
	wantEqual(t, "30d clipped", h.Clipped, true)
	if want := time.Date(2026, 10, 31, 13, 0, 0, 0, berlin); !h.HoursFrom.Equal(want) {
		t.Errorf("30d hours from %v; want %v", h.HoursFrom, want)
	}

	// The same week in UTC moves every cell by an hour, and V3's first
	// pageview and V5's onto other days.
	weekUTC, _ := query.PeriodRange("7d", base, time.UTC) // Nov 23..29 UTC
	h, err = a.SiteHeatmap("site-heat", weekUTC)
	if err != nil {
		t.Fatalf("SiteHeatmap: %v", err)
	}
	checkHeatmap(t, "7d UTC", h,
		map[cell]int64{{wed, 9}: 2, {sat, 18}: 1, {sat, 19}: 1, {sun, 22}: 1, {sun, 23}: 1},
		// V3 spans 22:40..23:10 UTC: active in Sun 22 and Sun 23.
		map[cell]int64{{wed, 9}: 1, {sat, 18}: 1, {sat, 19}: 1, {sun, 22}: 1, {sun, 23}: 1})
}

func checkHeatmap(t *testing.T, what string, h *query.Heatmap, pageviews, visits map[cell]int64) {
	t.Helper()
	for wd := range 7 {
		for hr := range 24 {
			c := cell{wd, hr}
			if got := h.Pageviews[wd][hr]; got != pageviews[c] {
				t.Errorf("%s: pageviews of %s %02d h: got %d; want %d", what, weekdayNames[wd], hr, got, pageviews[c])
			}
			if got := h.Visits[wd][hr]; got != visits[c] {
				t.Errorf("%s: visits of %s %02d h: got %d; want %d", what, weekdayNames[wd], hr, got, visits[c])
			}
		}
	}
}
