package rollup

import (
	"fmt"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
	"github.com/waymark/waymark/store"
)

// BenchmarkDashboardQueries measures the overview, heatmap and goal
// answers over the seeded 30 days of BenchmarkQuery30Days (a link with
// 1,000,000 clicks a day, a site with 1,000,000 pageviews a day over
// 1,000 pages), next to the 30-day link series and site time series as a
// baseline of the same run. The last hour also holds 80,000 raw events
// (clicks of 100 links, "big" among them), which the overview's last
// click reads.
func BenchmarkDashboardQueries(b *testing.B) {
	a, r := openSeeded(b, dimPage, 1000)
	seedRecentRaw(b, a, 20, 4000)
	ny := r.Location()
	goals := []store.Goal{
		{ID: "one", PagePath: "/page/0001", DisplayName: "One page"},
		{ID: "few", PagePath: "/page/000*", DisplayName: "Ten pages"},
		{ID: "event", EventName: "Signup", DisplayName: "Signup"},
	}
	// Every page of the site: the worst case, a union of 1,000 pages.
	allPages := []store.Goal{{ID: "all", PagePath: "/page/**", DisplayName: "Any page"}}
	b.Run("baseline-link-series-day", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := a.LinkStats("big", r, query.Day); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("baseline-site-timeseries-day", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := a.SiteTimeseries("bigsite", r, query.Day, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("link-overview", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			o, err := a.LinkOverview("big", ny)
			if err != nil || o.LastClick == nil || o.PeakHour == nil {
				b.Fatalf("LinkOverview: %v %+v", err, o)
			}
		}
	})
	b.Run("site-heatmap-30d", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			h, err := a.SiteHeatmap("bigsite", r)
			if err != nil || h.Total.Pageviews == 0 {
				b.Fatalf("SiteHeatmap: %v", err)
			}
		}
	})
	b.Run("site-goals-30d", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			g, err := a.SiteGoalStats("bigsite", goals, r)
			if err != nil || g.Goals[0].Visitors == 0 {
				b.Fatalf("SiteGoalStats: %v %+v", err, g)
			}
		}
	})
	b.Run("site-goals-30d-1000-pages", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			g, err := a.SiteGoalStats("bigsite", allPages, r)
			if err != nil || g.Goals[0].Visitors == 0 {
				b.Fatalf("SiteGoalStats: %v %+v", err, g)
			}
		}
	})
}

// seedRecentRaw applies segs segments of n clicks each, spread over the
// hour before the clock's now, through the real apply: raw blocks of the
// last hour for the last-click scan.
func seedRecentRaw(b *testing.B, a *Aggregator, segs, n int) {
	now := a.cfg.Now()
	k := 0
	for s := range segs {
		seg := &verifiedSegment{ref: ingest.SegmentRef{Node: "edge-raw", Seq: uint64(s + 1)}}
		for i := range n {
			k++
			t := now.Add(-time.Hour + time.Duration(k)*time.Hour/time.Duration(segs*n+1))
			ev := click("raw", k, fmt.Sprintf("code%03d", i%100), t, false)
			if i%100 == 0 {
				ev.Code = "big"
			}
			appendBenchEvent(seg, ev)
		}
		if _, err := a.apply([]*verifiedSegment{seg}); err != nil {
			b.Fatalf("apply: %v", err)
		}
	}
}
