package clickhouse

import (
	"reflect"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
)

// One visitor active every 20 minutes for 3 days (one visit: 216
// pageviews, /long from Dec 1 00:10 to /end at Dec 3 23:50, 258,000 s)
// and an ordinary one (a bounce on /x at Dec 2 12:00), materialized with
// MaxEvents 100: a run reads one day (72 events) and the visit carried
// into it, never the visit's 216 events. On main every run failed
// (the window widened past 100 events) and the units stayed pending.
func longVisitEvents(site string) []ingest.Event {
	var evs []ingest.Event
	for k := range 216 {
		path := "/long"
		if k == 215 {
			path = "/end"
		}
		evs = append(evs, pageview(site, path, at(0, 0, 10+20*k, 0, 0), 9, 0))
	}
	return append(evs, pageview(site, "/x", at(1, 12, 0, 0, 0), 3, 0))
}

func TestLongVisitIsMaterialized(t *testing.T) {
	c := newClient(t, sharedServer(t))
	now := dec1.AddDate(0, 0, 4).Add(2 * time.Hour)
	b := NewBackend(c, BackendConfig{Now: func() time.Time { return now }, MaxEvents: 100})
	raw := NewBackend(c, BackendConfig{Now: func() time.Time { return now }, NoRows: true})
	evs := longVisitEvents("lv")
	mustStore(t, b, segment("e1", 1, evs[:150]), Stored)
	mustStore(t, b, segment("e1", 2, evs[150:]), Stored)
	failed := c.m.materializeFailed.Get()
	if n, err := b.MaterializeOnce(testCtx(t)); err != nil || n == 0 {
		t.Fatalf("MaterializeOnce: %d units, %v; want every ready unit", n, err)
	}
	if got := c.m.unitsPending.Load(); got != 0 {
		t.Errorf("%d units pending; want 0", got)
	}
	if got := c.m.materializeFailed.Get() - failed; got != 0 {
		t.Errorf("%d failed runs; want 0", got)
	}
	all := query.SiteMetrics{Visitors: 2, Visits: 2, Pageviews: 217, Events: 217, ViewsPerVisit: 108.5, BounceRate: 50, VisitDuration: 129000}
	day1 := query.SiteMetrics{Visitors: 2, Visits: 2, Pageviews: 73, Events: 73, ViewsPerVisit: 108.5, BounceRate: 50, VisitDuration: 129000}
	day2 := query.SiteMetrics{Visitors: 1, Visits: 1, Pageviews: 72, Events: 72, ViewsPerVisit: 216, BounceRate: 0, VisitDuration: 258000}
	check := func(label string, want map[query.Range]query.SiteMetrics) {
		t.Helper()
		for r, w := range want {
			wantFromRows(t, b, "lv", r)
			m, err := b.SiteAggregate("lv", r, nil)
			if err != nil {
				t.Fatal(err)
			}
			wantMetrics(t, label, m, w)
			rm, err := raw.SiteAggregate("lv", r, nil)
			if err != nil || rm != m {
				t.Errorf("%s %v: raw %+v (%v), rows %+v", label, r, rm, err, m)
			}
			for _, dim := range []string{"entry_page", "exit_page", "page", "visitor_type"} {
				fb, ferr := b.SiteBreakdown("lv", dim, r, 10, nil)
				rb, rerr := raw.SiteBreakdown("lv", dim, r, 10, nil)
				if ferr == nil && rerr == nil {
					// From rows the visitors are merged sets (exact at
					// these sizes), listed as estimated.
					if !reflect.DeepEqual(fb.Estimated, []string{"visitors"}) {
						t.Errorf("%s %v by %s: estimated %q; want visitors", label, r, dim, fb.Estimated)
					}
					fb.Estimated = rb.Estimated
				}
				if ferr != nil || rerr != nil || !reflect.DeepEqual(fb, rb) {
					t.Errorf("%s %v by %s:\n rows %+v (%v)\n raw  %+v (%v)", label, r, dim, fb, ferr, rb, rerr)
				}
			}
		}
	}
	check("materialized", map[query.Range]query.SiteMetrics{dayRange(0, 4): all, dayRange(1, 2): day1, dayRange(2, 3): day2})
	exits, err := b.SiteBreakdown("lv", "exit_page", dayRange(0, 4), 10, nil)
	if err != nil || len(exits.Results) != 2 || exits.Results[0].Value != "/end" || exits.Results[0].Visits != 1 || exits.Results[1].Value != "/x" {
		t.Errorf("exit pages: %+v, %v; want /end and /x, a visit each", exits, err)
	}

	// A late pageview in the middle of the long visit (Dec 2 12:05): the
	// visit has 217 pageviews, Dec 2 74; the hours from 12:00 on are
	// written again.
	late := []ingest.Event{pageview("lv", "/late", at(1, 12, 5, 0, 0), 9, 0)}
	mustStore(t, b, segment("e1", 3, late), Stored)
	if n, err := b.MaterializeOnce(testCtx(t)); err != nil || n == 0 {
		t.Fatalf("MaterializeOnce after the late segment: %d units, %v", n, err)
	}
	all.Pageviews, all.Events, all.ViewsPerVisit = 218, 218, 109
	day1.Pageviews, day1.Events, day1.ViewsPerVisit = 74, 74, 109
	day2.ViewsPerVisit = 217
	check("late segment", map[query.Range]query.SiteMetrics{dayRange(0, 4): all, dayRange(1, 2): day1, dayRange(2, 3): day2})
}
