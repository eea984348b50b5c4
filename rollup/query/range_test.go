package query

import (
	"errors"
	"testing"
	"time"
)

// TestBuckets: series buckets start at the zone's midnight, Monday and
// first of the month, worked out by hand for New York across the DST
// change of 2026-03-08 (a 23-hour day).
func TestBuckets(t *testing.T) {
	ny := mustLoc(t, "America/New_York")
	at := func(m time.Month, d, h int) time.Time { return time.Date(2026, m, d, h, 0, 0, 0, ny) }
	r := Range{From: at(3, 7, 15), To: at(3, 10, 1), Loc: ny} // Saturday 15:00 to Tuesday 01:00
	for _, c := range []struct {
		g      Granularity
		starts []time.Time
	}{
		{Day, []time.Time{at(3, 7, 0), at(3, 8, 0), at(3, 9, 0), at(3, 10, 0)}},
		{Week, []time.Time{at(3, 2, 0), at(3, 9, 0)}}, // Mondays
		{Month, []time.Time{at(3, 1, 0)}},
	} {
		bs, err := r.Buckets(c.g)
		if err != nil {
			t.Fatalf("%s: %v", c.g, err)
		}
		if len(bs) != len(c.starts) {
			t.Fatalf("%s: %d buckets %v; want %d", c.g, len(bs), bs, len(c.starts))
		}
		for i, b := range bs {
			if !b.From.Equal(c.starts[i]) {
				t.Errorf("%s bucket %d starts %v; want %v", c.g, i, b.From, c.starts[i])
			}
			if i > 0 && !bs[i-1].To.Equal(b.From) {
				t.Errorf("%s bucket %d: gap after %v", c.g, i, bs[i-1].To)
			}
		}
	}
	days, _ := r.Buckets(Day)
	if got := days[1].To.Sub(days[1].From); got != 23*time.Hour {
		t.Errorf("2026-03-08 in New York lasts %v; want 23h", got)
	}
	hours, _ := Range{From: at(3, 8, 0), To: at(3, 8, 4), Loc: ny}.Buckets(Hour)
	if len(hours) != 3 { // 00, 01, 03: 02:00 does not exist that night
		t.Errorf("hours of 00:00-04:00 on the DST night: %d; want 3", len(hours))
	}
	if _, err := r.Buckets("minute"); !errors.Is(err, ErrUnsupportedQuery) {
		t.Errorf("granularity minute: %v; want ErrUnsupportedQuery", err)
	}
	long := Range{From: time.Unix(0, 0), To: time.Unix(0, 0).Add(20000 * time.Hour)}
	if _, err := long.Buckets(Hour); !errors.Is(err, ErrUnsupportedQuery) {
		t.Errorf("20000 hourly buckets: %v; want ErrUnsupportedQuery", err)
	}
	if (Range{}).Location() != time.UTC {
		t.Errorf("zero Range's Location is not UTC")
	}
}

func TestCheckRange(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		r  Range
		ok bool
	}{
		{Range{From: t0, To: t0.Add(time.Hour)}, true},
		{Range{From: t0, To: t0}, false},
		{Range{From: t0, To: t0.Add(-time.Hour)}, false},
		{Range{From: t0, To: t0.AddDate(10, 0, 0)}, true},
		{Range{From: t0, To: t0.AddDate(10, 2, 0)}, false},
	} {
		if err := CheckRange(c.r); (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrUnsupportedQuery)) {
			t.Errorf("CheckRange(%v..%v) = %v; want ok %v", c.r.From, c.r.To, err, c.ok)
		}
	}
}
