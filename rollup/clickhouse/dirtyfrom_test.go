package clickhouse

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
)

// Retention drops the day of a dirty-from mark, not its effect on the
// days kept. Hand-worked: now is day 2 12:00 and Retention 36 h, so day 0
// goes. Stored and materialized: s1's visitor 1 at day 0 10:00 and
// visitor 2 at day 1 10:00 (bounces). A late segment: visitor 3 at day 0
// 11:00 and visitor 4 at day 1 11:00 marks s1 dirty from day 0 11:00
// (one mark, in the day that goes). After retention the mark is one at
// day 1 00:00 with its version, so day 1's units are still dirty (its
// horizon at or before 11:00), day 1 is 2 bouncing visits of 2 visitors
// before and after the units are written again. Dropping the marks
// before the cut without the fold leaves day 1 clean at its old rows:
// 1 visit.
func TestRetentionKeepsADirtyMarksEffect(t *testing.T) {
	c := newClient(t, sharedServer(t))
	ctx := testCtx(t)
	now := dec1.AddDate(0, 0, 2).Add(12 * time.Hour)
	b := NewBackend(c, BackendConfig{Now: func() time.Time { return now }, Retention: 36 * time.Hour})
	mustStore(t, b, segment("e1", 1, []ingest.Event{pageview("s1", "/", at(0, 10, 0, 0, 0), 1, 0), pageview("s1", "/", at(1, 10, 0, 0, 0), 2, 0)}), Stored)
	mustMaterialize(t, b)
	day1 := dayRange(1, 2)
	wantFromRows(t, b, "s1", day1)
	m, err := b.SiteAggregate("s1", day1, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantMetrics(t, "day 1 before the late segment", m, query.SiteMetrics{Visitors: 1, Visits: 1, Pageviews: 1, Events: 1, ViewsPerVisit: 1, BounceRate: 100})

	before := maxDirtyVersion(t, c)
	mustStore(t, b, segment("e1", 2, []ingest.Event{pageview("s1", "/", at(0, 11, 0, 0, 0), 3, 0), pageview("s1", "/", at(1, 11, 0, 0, 0), 4, 0),
		click("k1", at(0, 23, 30, 0, 0), 5, false), click("k1", at(1, 0, 30, 0, 0), 5, false)}), Stored)
	late := maxDirtyVersion(t, c)
	want := []string{fmt.Sprintf(" %d %d 1", at(0, 23, 0, 0, 0)/1000, at(1, 1, 0, 0, 0)/1000), fmt.Sprintf("s1 %d 0 1", at(0, 11, 0, 0, 0)/1000)}
	if got := dirtyMarks(t, c, before); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the late segment's marks: %q; want %q", got, want)
	}
	for range 2 { // a second run changes nothing
		if _, err := b.ApplyRetention(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The delete is a mutation, applied in the background: poll.
	cut := Uint(uint64(at(1, 0, 0, 0, 0) / 1000))
	for {
		r, err := c.Query(ctx, "SELECT count() FROM site_dirty WHERE from_unit < toDateTime("+cut+")")
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := rawRow(r.Data[0])[0].uint(); n == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the marks before the cut were never deleted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The links' range [day 0 23:00, day 1 01:00) is cut to day 1.
	r, err := c.Query(ctx, "SELECT site, toUInt32(from_unit), toUInt32(until_unit), version FROM site_dirty FINAL ORDER BY site")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, raw := range r.Data {
		row := rawRow(raw)
		key, _ := row[0].str()
		from, _ := row[1].int()
		until, _ := row[2].int()
		v, _ := row[3].uint()
		got = append(got, fmt.Sprintf("%s %d %d %d", key, from, until, v))
	}
	if want := fmt.Sprintf(" %s %d %d; s1 %s 0 %d", cut, at(1, 1, 0, 0, 0)/1000, late, cut, late); strings.Join(got, "; ") != want {
		t.Errorf("the marks after retention (key from until version): %q; want %q (from day 1 00:00, the late marks' version)", got, want)
	}

	lo, hi := hourBounds(day1)
	if p, err := b.plan(ctx, "s1", lo, hi); err != nil || p != nil && p.h > at(1, 11, 0, 0, 0) {
		t.Errorf("plan of day 1 after retention: %+v, %v; want the horizon at or before 11:00", p, err)
	}
	two := query.SiteMetrics{Visitors: 2, Visits: 2, Pageviews: 2, Events: 2, ViewsPerVisit: 1, BounceRate: 100}
	if m, err = b.SiteAggregate("s1", day1, nil); err != nil {
		t.Fatal(err)
	}
	wantMetrics(t, "day 1 after retention", m, two)
	if n := mustMaterialize(t, b); n == 0 {
		t.Fatal("day 1's dirty units were not written again")
	}
	wantFromRows(t, b, "s1", day1)
	if m, err = b.SiteAggregate("s1", day1, nil); err != nil {
		t.Fatal(err)
	}
	wantMetrics(t, "day 1 materialized again", m, two)
	if ls, err := b.LinkStats("k1", day1, query.Day); err != nil || ls.Totals.Clicks != 1 {
		t.Errorf("k1 on day 1: %+v, %v; want the click at 00:30", ls.Totals, err)
	}
}

// applyDirty by hand: markers at hours 10 (clean, v5), 11 (clean, v9),
// 12 (dirty, v3), 14 (clean, v20); an open mark from 11 at v7 and one
// from 13 at v4, a range [9, 11) at v6. D: 9 6, 10 6, 11 7, 12 7, 13 7,
// 14 7, 15 7. So 9 dirty (6), 10 dirty (6 > 5), 11 clean (9 > 7), 12
// dirty (7), 13 dirty (7), 14 clean, 15 dirty (7), up to the end 16.
func TestApplyDirtyByHand(t *testing.T) {
	units := map[int64]unitState{10: {5, true}, 11: {9, true}, 12: {3, false}, 14: {20, true}}
	hours := applyDirty(units, []dirtyMark{{13, 0, 4}, {11, 0, 7}, {9, 11, 6}}, 16)
	want := map[int64]unitState{9: {6, false}, 10: {6, false}, 11: {9, true}, 12: {7, false}, 13: {7, false}, 14: {20, true}, 15: {7, false}}
	if fmt.Sprint(units) != fmt.Sprint(want) || fmt.Sprint(hours) != "[9 10 11 12 13 14 15]" {
		t.Errorf("applyDirty: %v, hours %v; want %v, hours 9 to 15", units, hours, want)
	}
}
