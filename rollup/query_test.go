package rollup

import (
	"testing"
	"time"
)

func TestCountFilters(t *testing.T) {
	a := openTest(t, testConfig(t, t.TempDir(), &testClock{now: base}))
	srv := startServer(t, a)
	srv.ship(t, threeSegments()...)
	// A day earlier: counters add up across days.
	y := base.Add(-24 * time.Hour)
	srv.ship(t, segmentBytes("edge-1", 3, click("y", 1, "abc", y, true), pageview("y", 2, "s2", y, false)))

	cases := []struct {
		f    Filter
		want uint64
	}{
		{Filter{}, 11},
		{Filter{BotsOnly: true}, 3},
		{Filter{Code: "abc"}, 5},
		{Filter{Code: "abc", BotsOnly: true}, 2},
		{Filter{Code: "xyz"}, 2},
		{Filter{Code: "xyz", BotsOnly: true}, 0},
		{Filter{SiteID: "s1"}, 3},
		{Filter{SiteID: "s1", BotsOnly: true}, 1},
		{Filter{SiteID: "s2"}, 1},
		{Filter{Code: "nope"}, 0},
		{Filter{Code: "abc", SiteID: "s1"}, 0}, // no event has both: a scan
	}
	for _, c := range cases {
		wantCount(t, a, c.f, c.want)
	}
}

func TestTailOrder(t *testing.T) {
	a := openTest(t, testConfig(t, t.TempDir(), &testClock{now: base}))
	srv := startServer(t, a)
	// Shipped out of time order, across two days.
	at := func(h int) time.Time { return base.Add(time.Duration(h) * time.Hour) }
	srv.ship(t, segmentBytes("edge-1", 1,
		click("t", 3, "abc", at(-3), false),
		click("t", 1, "abc", at(-30), false),
		pageview("t", 5, "s1", at(-1), true)))
	srv.ship(t, segmentBytes("edge-2", 1,
		click("t", 4, "xyz", at(-2), false),
		click("t", 2, "abc", at(-20), true)))

	ids := func(n int, f Filter) []int {
		t.Helper()
		evs, err := a.Tail(n, f)
		if err != nil {
			t.Fatalf("Tail: %v", err)
		}
		var out []int
		for _, ev := range evs {
			out = append(out, int(ev.ID[15]))
		}
		return out
	}
	cases := []struct {
		n    int
		f    Filter
		want []int
	}{
		{3, Filter{}, []int{3, 4, 5}},
		{100, Filter{}, []int{1, 2, 3, 4, 5}},
		{2, Filter{Code: "abc"}, []int{2, 3}},
		{10, Filter{BotsOnly: true}, []int{2, 5}},
		{10, Filter{SiteID: "s1"}, []int{5}},
		{0, Filter{}, nil},
	}
	for _, c := range cases {
		got := ids(c.n, c.f)
		if len(got) != len(c.want) {
			t.Errorf("Tail(%d, %+v): got %v; want %v", c.n, c.f, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("Tail(%d, %+v): got %v; want %v", c.n, c.f, got, c.want)
				break
			}
		}
	}

	// The events come back whole.
	evs, err := a.Tail(1, Filter{})
	if err != nil {
		t.Fatalf("Tail: %v", err)
	}
	want := pageview("t", 5, "s1", at(-1), true)
	got := evs[0]
	if got.SiteID != want.SiteID || got.Path != want.Path || got.Time != want.Time || !got.Bot() ||
		len(got.Props) != 1 || got.Props[0] != want.Props[0] {
		t.Errorf("Tail event: got %+v; want %+v", got, want)
	}
}
