package clickhouse

import (
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
)

// A late segment (a pageview and a click at Dec 1 10:00 and 10:01, one
// visitor): the pass right after it leaves the site's units and the
// link hours to a later one, and once the marks are settle old a pass
// writes them, with the hand counts: 1 visit, 2 pageviews, 60 s.
func TestMaterializerWaitsForMarksToSettle(t *testing.T) {
	c := newClient(t, sharedServer(t))
	now := dec1.AddDate(0, 0, 4)
	const settle = 300 * time.Millisecond
	b := NewBackend(c, BackendConfig{Now: func() time.Time { return now }, MarkSettle: settle})
	mustStore(t, b, segment("e1", 1, []ingest.Event{
		pageview("st", "/p", at(0, 10, 0, 0, 0), 4, 0),
		pageview("st", "/q", at(0, 10, 1, 0, 0), 4, 0),
		click("kst", at(0, 10, 0, 0, 0), 4, false),
	}), Stored)
	waits := c.m.settleWaits.Get()
	if n := mustMaterialize(t, b); n != 0 {
		t.Fatalf("the pass right after a late segment wrote %d units and hours; want none (settling)", n)
	}
	if got := c.m.settleWaits.Get() - waits; got != 2 {
		t.Errorf("%d settle waits; want 2 (the site, the link hours)", got)
	}
	if got := c.m.unitsPending.Load(); got == 0 {
		t.Error("no site units pending while they settle")
	}
	deadline := time.Now().Add(10 * time.Second)
	for c.m.unitsPending.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d units still pending 10 s after the last late segment", c.m.unitsPending.Load())
		}
		mustMaterialize(t, b)
	}
	r := dayRange(0, 1)
	wantFromRows(t, b, "st", r)
	m, err := b.SiteAggregate("st", r, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantMetrics(t, "Dec 1", m, query.SiteMetrics{Visitors: 1, Visits: 1, Pageviews: 2, Events: 2, ViewsPerVisit: 2, VisitDuration: 60})
}

// settling by hand: versions are mark times in ns; settle 10 s.
func TestSettlingRule(t *testing.T) {
	now := time.Unix(1000, 0)
	ns := func(sec int64) uint64 { return uint64(sec) * uint64(time.Second) }
	units := map[int64]unitState{
		1: {ns(995), false}, // marked 5 s ago
		2: {ns(950), false}, // 50 s ago
		3: {ns(930), false}, // 70 s ago: past 6 x 10 s
		4: {ns(999), true},  // clean: never waits
		5: {0, false},       // never written: never waits
	}
	for _, c := range []struct {
		todo   []int64
		settle time.Duration
		want   bool
	}{
		{[]int64{1}, 10 * time.Second, true},
		{[]int64{1, 2}, 10 * time.Second, true},     // oldest 50 s < 60 s
		{[]int64{1, 2, 3}, 10 * time.Second, false}, // oldest 70 s: written
		{[]int64{2}, 10 * time.Second, false},       // newest 50 s old: settled
		{[]int64{4, 5}, 10 * time.Second, false},    // nothing marked
		{[]int64{1}, 0, false},                      // no settle
		{[]int64{1, 2, 3}, 20 * time.Second, true},  // oldest 70 s < 120 s
	} {
		if got := settling(units, c.todo, now, c.settle); got != c.want {
			t.Errorf("settling(%v, settle %v) = %v; want %v", c.todo, c.settle, got, c.want)
		}
	}
}
