package clickhouse

import (
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
)

// A late event stored during a pass, after the run of its day and before
// the run of the next: the next day's run starts from the visits carried
// over midnight without it. One visitor: /a at Dec 1 23:40 and /c at Dec
// 2 00:05 (one visit across midnight, closing in Dec 2's first unit),
// then /b at 23:50 stored late, inside the pass. By hand, over the two
// days: 1 visit, 3 pageviews, no bounce, 25 min = 1500 s. With run
// versions from each run's own start (and no margin), Dec 2's units
// stayed clean beating the late mark, and the rows kept 2 pageviews for
// good.
func TestLateEventDuringAPassIsNotLost(t *testing.T) {
	c := newClient(t, sharedServer(t))
	now := dec1.AddDate(0, 0, 4)
	b := NewBackend(c, BackendConfig{Now: func() time.Time { return now }})
	b.versionMargin = 0 // one clock: the mark is written before the next run starts
	mustStore(t, b, segment("e1", 1, []ingest.Event{
		pageview("pr", "/a", at(0, 23, 40, 0, 0), 7, 0),
		pageview("pr", "/c", at(1, 0, 5, 0, 0), 7, 0),
	}), Stored)
	lateStored := false
	b.afterRun = func(site string, u0, u1 int64) {
		if lateStored || u1 != hourOf(at(1, 0, 0, 0, 0)) {
			return
		}
		lateStored = true
		mustStore(t, b, segment("e1", 2, []ingest.Event{pageview("pr", "/b", at(0, 23, 50, 0, 0), 7, 0)}), Stored)
	}
	mustMaterialize(t, b)
	if !lateStored {
		t.Fatal("the pass never ran Dec 1's last unit")
	}
	for range 2 { // the units the late mark dirtied, then nothing
		mustMaterialize(t, b)
	}
	if got := c.m.unitsPending.Load(); got != 0 {
		t.Fatalf("%d units pending; want 0", got)
	}
	r := dayRange(0, 2)
	wantFromRows(t, b, "pr", r)
	m, err := b.SiteAggregate("pr", r, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantMetrics(t, "Dec 1-2", m, query.SiteMetrics{Visitors: 1, Visits: 1, Pageviews: 3, Events: 3, ViewsPerVisit: 3, BounceRate: 0, VisitDuration: 1500})
}
