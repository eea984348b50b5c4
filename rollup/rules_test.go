package rollup

import (
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
)

// TestLinkBreakdownByRule: clicks on a link with redirect rules count
// under the rule they followed ("0" the link's own URL); clicks without
// the rules flag (the link had none then) and bots count under none.
func TestLinkBreakdownByRule(t *testing.T) {
	clock := &testClock{now: base}
	a := openTest(t, testConfig(t, t.TempDir(), clock))
	srv := startServer(t, a)
	ruled := func(n int, rule uint8, bot bool) ingest.Event {
		ev := click("r", n, "abc", base.Add(-time.Duration(n)*time.Minute), bot)
		ev.Flags |= ingest.FlagRules
		ev.Rule = rule
		return ev
	}
	srv.ship(t, segmentBytes("edge-1", 1,
		ruled(1, 1, false), ruled(2, 1, false), ruled(3, 3, false), // rule 1 twice, rule 3 once
		ruled(4, 0, false), ruled(5, 0, false), ruled(6, 0, false), // the fallback three times
		ruled(7, 2, true), // a bot: not in any dimension
		click("r", 8, "abc", base.Add(-8*time.Minute), false), // before the link had rules
	))
	r := query.Range{From: base.Add(-time.Hour), To: base.Add(time.Hour), Loc: time.UTC}
	bd, err := a.LinkBreakdown("abc", "rule", r, 10)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, row := range bd.Results {
		got[row.Value] = row.Clicks
	}
	want := map[string]int64{"1": 2, "3": 1, "0": 3}
	if len(got) != len(want) || got["1"] != 2 || got["3"] != 1 || got["0"] != 3 {
		t.Fatalf("breakdown by rule %v; want %v", got, want)
	}
	// The total is every human click, with or without rules: 7.
	if bd.Total != 7 {
		t.Fatalf("total %d; want 7", bd.Total)
	}
}
