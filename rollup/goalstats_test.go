package rollup

import (
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
	"github.com/waymark/waymark/store"
)

// goalSite is the site of the goal tests, with its goals (store's
// semantics: "*" and "**" match any characters, "|" alternates, a pattern
// without "*" is compared whole).
var goalSite = store.Site{ID: "site-goals", Domain: "goals.example", Timezone: "UTC", Owner: "owner-a", Goals: []store.Goal{
	{ID: "g1", EventName: "Signup", DisplayName: "Signup"},
	{ID: "g2", PagePath: "/blog/*", DisplayName: "Visit /blog/*"},
	{ID: "g3", PagePath: "/pricing|/docs", DisplayName: "Visit /pricing|/docs"},
	{ID: "g4", PagePath: "/pricing|/doc*", DisplayName: "Visit /pricing|/doc*"},
	{ID: "g5", EventName: "Nothing", DisplayName: "Nothing"},
	{ID: "g6", PagePath: "/", DisplayName: "Visit /"},
	{ID: "g7", EventName: "Purchase", DisplayName: "Purchase"},
}}

// goalEvents: the range is [Nov 29 10:00, Nov 30 00:00) UTC.
var goalEvents = []struct {
	at   string
	hash uint64
	kind ingest.Kind
	path string // or the event name
	bot  bool
}{
	{"2026-11-29T12:00:00Z", 1, ingest.KindPageview, "/", false},
	{"2026-11-29T12:01:00Z", 1, ingest.KindPageview, "/blog/a", false},
	{"2026-11-29T12:02:00Z", 1, ingest.KindCustom, "Signup", false},
	{"2026-11-29T13:00:00Z", 2, ingest.KindPageview, "/blog/b/c", false},
	{"2026-11-29T13:01:00Z", 2, ingest.KindCustom, "Signup", false},
	{"2026-11-29T13:02:00Z", 2, ingest.KindCustom, "Signup", false},
	{"2026-11-29T14:00:00Z", 3, ingest.KindPageview, "/pricing", false},
	{"2026-11-29T15:00:00Z", 4, ingest.KindPageview, "/", false},
	{"2026-11-29T16:00:00Z", 5, ingest.KindPageview, "/docs", false},
	{"2026-11-29T17:00:00Z", 6, ingest.KindCustom, "Purchase", false},
	{"2026-11-29T18:00:00Z", 7, ingest.KindPageview, "/", true},        // a bot
	{"2026-11-28T18:00:00Z", 8, ingest.KindPageview, "/blog/a", false}, // before the range
	// Visitor 9 viewed /blog/z before the range and sent only an
	// engagement event inside it: a visitor of the range (Plausible counts
	// engagement events there), not a conversion (no pageview in it).
	{"2026-11-29T09:50:00Z", 9, ingest.KindPageview, "/blog/z", false},
	{"2026-11-29T10:05:00Z", 9, ingest.KindEngagement, "/blog/z", false},
}

func shipGoalEvents(t *testing.T, a *Aggregator) {
	t.Helper()
	var segs [][]byte
	for i, e := range goalEvents {
		at, err := time.Parse(time.RFC3339, e.at)
		if err != nil {
			t.Fatal(err)
		}
		ev := pageview("goal", i+1, goalSite.ID, at, e.bot)
		ev.Kind, ev.VisitorHash, ev.Props = e.kind, e.hash, nil
		switch e.kind {
		case ingest.KindCustom:
			ev.Name, ev.Path = e.path, "/"
		case ingest.KindEngagement:
			ev.Name, ev.Path, ev.EngagedMS, ev.ScrollDepth = "engagement", e.path, 4000, 50
		default:
			ev.Path = e.path
		}
		segs = append(segs, segmentBytes("edge-goal", uint64(i+1), ev))
	}
	startServer(t, a).ship(t, segs...)
}

// goalRange is the range of goalEvents.
var goalRange = query.Range{From: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), To: time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)}

type wantGoal struct {
	id       string
	visitors uint64
	events   int64
	cr       float64
}

// goalsByHand: 7 visitors in the range (1-6 and 9). Conversion rate =
// converters / 7 * 100, two decimals: 2/7 -> 28.57, 1/7 -> 14.29. Ties
// in visitors are ordered by display name.
var goalsByHand = []wantGoal{
	{"g1", 2, 3, 28.57}, // Signup: visitors 1, 2
	{"g6", 2, 2, 28.57}, // "/": visitors 1, 4 (7 is a bot)
	{"g2", 2, 2, 28.57}, // /blog/a, /blog/b/c: visitors 1, 2 (8 is before the range, 9 sent no pageview in it)
	{"g4", 2, 2, 28.57}, // ^/pricing|/doc.*$: /pricing and /docs, visitors 3, 5
	{"g7", 1, 1, 14.29}, // Purchase: visitor 6
	{"g5", 0, 0, 0},     // no such event
	{"g3", 0, 0, 0},     // no "*": the whole pattern, "|" included, is the path
}

func TestSiteGoalStats(t *testing.T) {
	a := openTest(t, testConfig(t, t.TempDir(), &testClock{now: base}))
	shipGoalEvents(t, a)
	got, err := a.SiteGoalStats(goalSite.ID, goalSite.Goals, goalRange)
	if err != nil {
		t.Fatalf("SiteGoalStats: %v", err)
	}
	wantEqual(t, "total visitors", got.TotalVisitors, 7)
	checkGoals(t, got.Goals, goalsByHand)
}

func checkGoals(t *testing.T, got []query.GoalStat, want []wantGoal) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("goals: got %d %+v; want %d", len(got), got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.ID != w.id || g.Visitors != w.visitors || g.Events != w.events || g.ConversionRate != w.cr {
			t.Errorf("goal %d: got %s visitors %d events %d cr %v; want %s %d %d %v",
				i, g.ID, g.Visitors, g.Events, g.ConversionRate, w.id, w.visitors, w.events, w.cr)
		}
		if (g.GoalType == "page") != (g.PagePath != nil) || (g.GoalType == "event") != (g.EventName != nil) {
			t.Errorf("goal %s: type %q with page path %v and event name %v", g.ID, g.GoalType, g.PagePath, g.EventName)
		}
	}
}

// TestSiteGoalStatsManyPages: a page goal matching more pages than are
// unioned by point reads gives the same converters by the scan.
func TestSiteGoalStatsManyPages(t *testing.T) {
	a := openTest(t, testConfig(t, t.TempDir(), &testClock{now: base}))
	var segs [][]byte
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	const pages = goalUnionByPoint + 36 // 100 pages
	for i := range pages {
		ev := pageview("many", i+1, "site-many", at.Add(time.Duration(i)*time.Second), false)
		ev.Path, ev.Props = "/docs/p"+string(rune('a'+i%26))+string(rune('a'+i/26)), nil
		ev.VisitorHash = uint64(i%40 + 1) // 40 visitors, each on several pages
		segs = append(segs, segmentBytes("edge-1", uint64(i+1), ev))
	}
	other := pageview("many", 1000, "site-many", at, false)
	other.Path, other.Props, other.VisitorHash = "/", nil, 41
	segs = append(segs, segmentBytes("edge-1", 1000, other))
	startServer(t, a).ship(t, segs...)
	goals := []store.Goal{{ID: "d", PagePath: "/docs/**", DisplayName: "Docs"}}
	got, err := a.SiteGoalStats("site-many", goals, goalRange)
	if err != nil {
		t.Fatalf("SiteGoalStats: %v", err)
	}
	wantEqual(t, "total visitors", got.TotalVisitors, 41)
	checkGoals(t, got.Goals, []wantGoal{{"d", 40, pages, 97.56}}) // 40 / 41 * 100 = 97.560...
}
