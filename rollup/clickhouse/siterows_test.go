package clickhouse_test

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/waymark/waymark/internal/chserver"
	"github.com/waymark/waymark/rollup/clickhouse"
	"github.com/waymark/waymark/rollup/internal/world"
	"github.com/waymark/waymark/rollup/query"
	"github.com/waymark/waymark/store"
)

// siteQuestions asks fast and raw the same site questions over ranges
// that start mid-day, cross the horizon, run up to now, in UTC and New
// York, with a filter on every site dimension, a breakdown by every one,
// and series by day and hour: the answers must be equal, visitors
// included (both count them exactly).
func siteQuestions(t *testing.T, label string, fast, raw *clickhouse.Backend) {
	t.Helper()
	ny := world.MustLoc(t, world.TZ)
	base := world.Base
	ranges := []query.Range{
		{From: base.Add(-47 * time.Hour), To: base, Loc: time.UTC},
		{From: base.Add(-48 * time.Hour).Truncate(24 * time.Hour), To: base.Truncate(24 * time.Hour), Loc: time.UTC},
		{From: base.Add(-30 * time.Hour), To: base.Add(-5 * time.Hour), Loc: time.UTC},
		{From: base.Add(-26 * time.Hour), To: base.Add(-25 * time.Hour), Loc: time.UTC},
		{From: base.Add(-20*time.Hour - 30*time.Minute), To: base.Add(time.Hour), Loc: time.UTC},
		{From: time.Date(2026, 11, 28, 0, 0, 0, 0, ny), To: time.Date(2026, 11, 30, 0, 0, 0, 0, ny), Loc: ny},
		{From: time.Date(2026, 11, 29, 0, 0, 0, 0, ny), To: time.Date(2026, 12, 1, 0, 0, 0, 0, ny), Loc: ny},
	}
	// A value of each dimension present in the world, found by the raw
	// breakdown, filtered on with "is" and with "is_not".
	whole := query.Range{From: base.Add(-48 * time.Hour), To: base.Add(time.Hour), Loc: time.UTC}
	var filters [][]query.DimFilter
	filters = append(filters, nil)
	for _, dim := range query.SiteDimensions {
		bd, err := raw.SiteBreakdown(world.Site, dim, whole, 3, nil)
		if err != nil {
			t.Fatalf("raw breakdown by %s: %v", dim, err)
		}
		if len(bd.Results) == 0 {
			t.Fatalf("raw breakdown by %s is empty: the world should have values", dim)
		}
		v := bd.Results[0].Value
		filters = append(filters,
			[]query.DimFilter{{Dimension: dim, Op: "is", Values: []string{v}}},
			[]query.DimFilter{{Dimension: dim, Op: "is_not", Values: []string{v}}})
	}
	filters = append(filters, []query.DimFilter{{Dimension: "page", Op: "contains", Values: []string{"blog"}}})
	same := func(what string, f, r any, ferr, rerr error) {
		t.Helper()
		if ferr != nil || rerr != nil {
			t.Fatalf("%s %s: fast %v, raw %v", label, what, ferr, rerr)
		}
		siteVisitorsClose(t, label+" "+what, f, r)
		if !reflect.DeepEqual(f, r) {
			t.Errorf("%s %s:\n fast %+v\n raw  %+v", label, what, f, r)
		}
	}
	for ri, r := range ranges {
		for _, fl := range filters {
			what := fmt.Sprintf("range %d aggregate %v", ri, fl)
			fa, ferr := fast.SiteAggregate(world.Site, r, fl)
			ra, rerr := raw.SiteAggregate(world.Site, r, fl)
			same(what, &fa, &ra, ferr, rerr)
		}
		for _, g := range []query.Granularity{query.Day, query.Hour} {
			for _, fl := range [][]query.DimFilter{nil, filters[1], filters[len(filters)-1]} {
				what := fmt.Sprintf("range %d series %s %v", ri, g, fl)
				fs, ferr := fast.SiteTimeseries(world.Site, r, g, fl)
				rs, rerr := raw.SiteTimeseries(world.Site, r, g, fl)
				same(what, fs, rs, ferr, rerr)
			}
		}
		goals := []store.Goal{
			{ID: "g1", DisplayName: "Signup page", PagePath: "/signup"},
			{ID: "g2", DisplayName: "Blog", PagePath: "/blog/*"},
			{ID: "g3", DisplayName: "Anything", PagePath: "/**"},
			{ID: "g4", DisplayName: "Purchase", EventName: "Purchase"},
			{ID: "g5", DisplayName: "Nothing", EventName: "never-sent"},
		}
		fg, ferr := fast.SiteGoalStats(world.Site, goals, r)
		rg, rerr := raw.SiteGoalStats(world.Site, goals, r)
		same(fmt.Sprintf("range %d goals", ri), fg, rg, ferr, rerr)
		for _, dim := range query.SiteDimensions {
			what := fmt.Sprintf("range %d breakdown %s", ri, dim)
			fb, ferr := fast.SiteBreakdown(world.Site, dim, r, 100, nil)
			rb, rerr := raw.SiteBreakdown(world.Site, dim, r, 100, nil)
			same(what, fb, rb, ferr, rerr)
		}
	}
}

// siteVisitorsClose checks the visitor numbers of a fast site answer
// within linkVisitorBound of the raw answer's (site rows merge visitor
// sets since migration 10: exact up to 128 a set, HLL past it), and that
// it lists them as estimated where it has a list, then sets them to the
// raw ones so the rest compares exactly.
func siteVisitorsClose(t *testing.T, what string, fast, raw any) {
	t.Helper()
	m := func(w string, f, r *query.SiteMetrics) { closeVisitors(t, w, &f.Visitors, r.Visitors) }
	switch f := fast.(type) {
	case *query.SiteMetrics:
		// Aggregates and series carry no Estimated list: the API marks
		// their visitors estimated (rollup/api).
		m(what, f, raw.(*query.SiteMetrics))
	case []query.SitePoint:
		r := raw.([]query.SitePoint)
		for i := range min(len(f), len(r)) {
			m(fmt.Sprintf("%s bucket %d", what, i), &f[i].SiteMetrics, &r[i].SiteMetrics)
		}
	case *query.SiteBreakdown:
		r := raw.(*query.SiteBreakdown)
		for i := range min(len(f.Results), len(r.Results)) {
			m(fmt.Sprintf("%s row %d", what, i), &f.Results[i].SiteMetrics, &r.Results[i].SiteMetrics)
		}
		if !reflect.DeepEqual(f.Estimated, []string{"visitors"}) && !reflect.DeepEqual(f.Estimated, []string{}) {
			t.Errorf("%s: estimated %q; want visitors (rows) or nothing (raw)", what, f.Estimated)
		}
		f.Estimated = r.Estimated
	case *query.SiteGoals:
		r := raw.(*query.SiteGoals)
		closeVisitors(t, what+" total", &f.TotalVisitors, r.TotalVisitors)
		for i := range min(len(f.Goals), len(r.Goals)) {
			closeVisitors(t, fmt.Sprintf("%s goal %d", what, i), &f.Goals[i].Visitors, r.Goals[i].Visitors)
			if d := math.Abs(f.Goals[i].ConversionRate - r.Goals[i].ConversionRate); d > linkVisitorBound*2*r.Goals[i].ConversionRate+0.01 {
				t.Errorf("%s goal %d: conversion rate %v from rows, %v raw", what, i, f.Goals[i].ConversionRate, r.Goals[i].ConversionRate)
			}
			f.Goals[i].ConversionRate = r.Goals[i].ConversionRate
		}
		if len(f.Estimated) != 0 && !reflect.DeepEqual(f.Estimated, []string{"total_visitors", "visitors", "conversion_rate"}) {
			t.Errorf("%s: estimated %q; want the three visitor fields (rows) or nothing (raw)", what, f.Estimated)
		}
		f.Estimated = r.Estimated
	}
}

// linkQuestions asks fast and raw the same link questions: series by
// day, hour (New York) and month (Tokyo), a breakdown by every link
// dimension, over ranges across the horizon. Equal answers: clicks
// exactly, visitors within linkVisitorBound of the raw uniqCombined (exact
// at these sizes; rows merge visitor sets: HLL past 128 visitors).
func linkQuestions(t *testing.T, label string, fast, raw *clickhouse.Backend) {
	t.Helper()
	base := world.Base
	ny, tokyo := world.MustLoc(t, world.TZ), world.MustLoc(t, "Asia/Tokyo")
	ranges := []query.Range{
		{From: base.Add(-47 * time.Hour), To: base, Loc: time.UTC},
		{From: base.Add(-30 * time.Hour), To: base.Add(-5 * time.Hour), Loc: ny},
		{From: base.Add(-20*time.Hour - 30*time.Minute), To: base.Add(time.Hour), Loc: time.UTC},
		{From: time.Date(2026, 11, 1, 0, 0, 0, 0, tokyo), To: time.Date(2026, 12, 1, 0, 0, 0, 0, tokyo), Loc: tokyo},
	}
	for ri, r := range ranges {
		for _, g := range []query.Granularity{query.Day, query.Hour, query.Month} {
			fs, ferr := fast.LinkStats(world.Code, r, g)
			rs, rerr := raw.LinkStats(world.Code, r, g)
			if ferr != nil || rerr != nil {
				t.Fatalf("%s range %d link stats by %s: fast %v, raw %v", label, ri, g, ferr, rerr)
			}
			closeVisitors(t, fmt.Sprintf("%s range %d link stats by %s totals", label, ri, g), &fs.Totals.UniqueVisitors, rs.Totals.UniqueVisitors)
			for i := range min(len(fs.Series), len(rs.Series)) {
				closeVisitors(t, fmt.Sprintf("%s range %d link stats by %s bucket %d", label, ri, g, i), &fs.Series[i].UniqueVisitors, rs.Series[i].UniqueVisitors)
			}
			if !reflect.DeepEqual(fs, rs) {
				t.Errorf("%s range %d link stats by %s:\n fast %+v\n raw  %+v", label, ri, g, fs, rs)
			}
		}
		for _, dim := range []string{"country", "device", "browser", "os", "referrer", "utm_source", "utm_medium", "utm_campaign"} {
			fb, ferr := fast.LinkBreakdown(world.Code, dim, r, 100)
			rb, rerr := raw.LinkBreakdown(world.Code, dim, r, 100)
			if ferr != nil || rerr != nil {
				t.Fatalf("%s range %d link breakdown by %s: fast %v, raw %v", label, ri, dim, ferr, rerr)
			}
			for i := range min(len(fb.Results), len(rb.Results)) {
				closeVisitors(t, fmt.Sprintf("%s range %d link breakdown by %s row %d", label, ri, dim, i), &fb.Results[i].UniqueVisitors, rb.Results[i].UniqueVisitors)
			}
			if !reflect.DeepEqual(fb, rb) {
				t.Errorf("%s range %d link breakdown by %s:\n fast %+v\n raw  %+v", label, ri, dim, fb, rb)
			}
		}
	}
}

// linkVisitorBound: 3 standard errors of a precision-14 HLL (0.81 %).
const linkVisitorBound = 0.0243

// closeVisitors checks *got within linkVisitorBound of want, then sets it
// to want so the rest of the answer compares exactly.
func closeVisitors(t *testing.T, what string, got *uint64, want uint64) {
	t.Helper()
	if d := math.Abs(float64(*got) - float64(want)); d > linkVisitorBound*float64(want) {
		t.Errorf("%s: %d visitors from rows, %d raw; want within %.2f %%", what, *got, want, 100*linkVisitorBound)
	}
	*got = want
}

func rowsBackend(t *testing.T, c *clickhouse.Client, now time.Time, noRows bool) *clickhouse.Backend {
	return clickhouse.NewBackend(c, clickhouse.BackendConfig{Now: func() time.Time { return now }, NoRows: noRows})
}

func TestRowsGiveTheRawAnswers(t *testing.T) {
	chserver.Require(t)
	srv := chserver.StartT(t)
	set := metrics.NewSet()
	c, err := clickhouse.New(clickhouse.Config{URL: srv.URL(), Database: "rows", Metrics: set})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := c.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	ch := rowsBackend(t, c, world.Base, false)
	w := world.Generate(4)
	storeAll(t, ch, w.Segments("edge-1", 97))
	raw := rowsBackend(t, c, world.Base, true)
	fromRows := set.GetOrCreateCounter(`waymark_clickhouse_site_questions_total{path="rows"}`)
	fromRaw := set.GetOrCreateCounter(`waymark_clickhouse_site_questions_total{path="raw"}`)
	linkRows := set.GetOrCreateCounter(`waymark_clickhouse_link_questions_total{path="rows"}`)
	linkRaw := set.GetOrCreateCounter(`waymark_clickhouse_link_questions_total{path="raw"}`)

	// Materialized up to a horizon a day before now (the units ready
	// then), asked now: ranges before, across and after the horizon.
	early := rowsBackend(t, c, world.Base.Add(-21*time.Hour-17*time.Minute), false)
	n, err := early.MaterializeOnce(ctx)
	if err != nil || n == 0 {
		t.Fatalf("MaterializeOnce a day before: %d units, %v; want some", n, err)
	}
	if again, err := early.MaterializeOnce(ctx); err != nil || again != 0 {
		t.Errorf("a second MaterializeOnce wrote %d units (%v); want none: all are clean", again, err)
	}
	rows0, raw0 := fromRows.Get(), fromRaw.Get()
	siteQuestions(t, "horizon a day back", ch, raw)
	linkQuestions(t, "horizon a day back", ch, raw)
	if fromRows.Get() == rows0 {
		t.Errorf("no question was answered from site rows")
	}
	t.Logf("horizon a day back: %d questions from rows, %d from raw events (both backends)", fromRows.Get()-rows0, fromRaw.Get()-raw0)

	// Everything ready materialized.
	if n, err = ch.MaterializeOnce(ctx); err != nil || n == 0 {
		t.Fatalf("MaterializeOnce now: %d units, %v; want some", n, err)
	}
	rows0, raw0 = fromRows.Get(), fromRaw.Get()
	lrows0, lraw0 := linkRows.Get(), linkRaw.Get()
	siteQuestions(t, "horizon now", ch, raw)
	linkQuestions(t, "horizon now", ch, raw)
	// The link questions: every fast one from rows, every raw one not.
	if fast, slow := linkRows.Get()-lrows0, linkRaw.Get()-lraw0; fast == 0 || fast != slow {
		t.Errorf("horizon now: %d link questions from rows, %d from raw events; want as many", fast, slow)
	}
	// Every question of the fast backend from rows: the raw backend asked
	// each of them too, and one breakdown per dimension more (the filter
	// values).
	if fast, slow := fromRows.Get()-rows0, fromRaw.Get()-raw0; fast == 0 || slow-fast != uint64(len(query.SiteDimensions)) {
		t.Errorf("horizon now: %d questions from rows, %d from raw events; want all the fast backend's from rows", fast, slow)
	}
}
