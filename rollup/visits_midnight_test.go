package rollup

import (
	"fmt"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
)

// midnightVisit is one visitor from 23:50 to 00:40 UTC: hash 1 before
// midnight, hash 2 after, the events of the first 30 minutes after
// midnight also carrying hash 1 as PrevVisitorHash (as ingest sends them).
func midnightVisit(mid time.Time) []ingest.Event {
	var evs []ingest.Event
	for i, off := range []time.Duration{-10 * time.Minute, 5 * time.Minute, 20 * time.Minute, 40 * time.Minute} {
		ev := pageview("mn", i, "s1", mid.Add(off), false)
		ev.VisitorHash = 1
		if off >= 0 {
			ev.VisitorHash = 2
		}
		if off >= 0 && off < 30*time.Minute {
			ev.PrevVisitorHash = 1
		}
		evs = append(evs, ev)
	}
	return evs
}

// permutations returns every order of 0..n-1.
func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := append(append(append([]int{}, p[:i]...), n-1), p[i:]...)
			out = append(out, q)
		}
	}
	return out
}

// TestVisitAcrossMidnightNewHash: the visit is one visit of 50 minutes and
// four pageviews whatever order its events arrive in, stays so when every
// segment is shipped again and after a rebuild. Its visitor keeps the
// first event's hash, as Plausible's session keeps its user_id across the
// salt rotation, so it is one visitor; live, that holds when the event
// before midnight arrives first (otherwise the sketches already hold the
// later hash too: they cannot take a visitor back), after a rebuild
// always.
func TestVisitAcrossMidnightNewHash(t *testing.T) {
	mid := base.Truncate(24 * time.Hour)
	evs := midnightVisit(mid)
	whole := query.Range{From: mid.Add(-time.Hour), To: mid.Add(time.Hour)}
	for _, order := range permutations(len(evs)) {
		t.Run(fmt.Sprint(order), func(t *testing.T) {
			a := openTest(t, testConfig(t, t.TempDir(), &testClock{now: base}))
			srv := startServer(t, a)
			var segs [][]byte
			for i, j := range order {
				segs = append(segs, segmentBytes("edge-1", uint64(i+1), evs[j]))
			}
			check := func(when string) {
				t.Helper()
				// Live, an event joins under the visit's first hash only
				// if it finds the visit there: the 23:50 event must come
				// first, and the 00:40 one (no previous hash, 35 minutes
				// after 00:05) after the 00:20 one that bridges to it.
				at := make([]int, len(order))
				for i, j := range order {
					at[j] = i
				}
				wantVisitors := uint64(1)
				if when != "rebuilt" && (at[0] != 0 || at[3] < at[2]) {
					wantVisitors = 2
				}
				m, err := a.SiteAggregate("s1", whole, nil)
				if err != nil {
					t.Fatalf("SiteAggregate: %v", err)
				}
				if m.Visits != 1 || m.Pageviews != 4 || m.BounceRate != 0 || m.VisitDuration != 3000 || m.ViewsPerVisit != 4 {
					t.Errorf("%s: got %+v; want 1 visit, 4 pageviews, bounce 0, 3000 s, 4 per visit", when, m)
				}
				if m.Visitors != wantVisitors {
					t.Errorf("%s: visitors got %d; want %d", when, m.Visitors, wantVisitors)
				}
				before, err := a.SiteAggregate("s1", query.Range{From: mid.Add(-time.Hour), To: mid}, nil)
				if err != nil {
					t.Fatalf("SiteAggregate: %v", err)
				}
				if before.Visits != 1 || before.Visitors != 1 {
					t.Errorf("%s: before midnight got %d visits, %d visitors; want 1 and 1", when, before.Visits, before.Visitors)
				}
			}
			for _, seg := range segs {
				srv.ship(t, seg)
			}
			check("shipped")
			srv.ship(t, segs...)
			check("shipped again")
			if err := a.Rebuild(mid.Add(-24*time.Hour), mid); err != nil {
				t.Fatalf("Rebuild: %v", err)
			}
			check("rebuilt")
		})
	}
}

// TestVisitAcrossMidnightStaysApart: hashes not linked by PrevVisitorHash,
// or linked but more than 30 minutes apart, stay separate visits.
func TestVisitAcrossMidnightStaysApart(t *testing.T) {
	mid := base.Truncate(24 * time.Hour)
	a := openTest(t, testConfig(t, t.TempDir(), &testClock{now: base}))
	srv := startServer(t, a)
	mk := func(n int, off time.Duration, hash, prev uint64) ingest.Event {
		ev := pageview("ap", n, "s1", mid.Add(off), false)
		ev.VisitorHash, ev.PrevVisitorHash = hash, prev
		return ev
	}
	srv.ship(t,
		segmentBytes("edge-1", 1, mk(0, 25*time.Minute, 20, 10)), // linked to 10, but too late
		segmentBytes("edge-1", 2, mk(1, -10*time.Minute, 10, 0)),
		segmentBytes("edge-1", 3, mk(2, -5*time.Minute, 30, 0)),
		segmentBytes("edge-1", 4, mk(3, 5*time.Minute, 40, 0)), // another visitor, not linked
	)
	m, err := a.SiteAggregate("s1", query.Range{From: mid.Add(-time.Hour), To: mid.Add(time.Hour)}, nil)
	if err != nil {
		t.Fatalf("SiteAggregate: %v", err)
	}
	if m.Visits != 4 || m.Pageviews != 4 || m.BounceRate != 100 {
		t.Errorf("got %+v; want 4 one-page visits", m)
	}
}

// TestVisitorStateLinksRoundTrip: visits (with their marks and flags) and
// links survive encoding; damaged encodings are refused.
func TestVisitorStateLinksRoundTrip(t *testing.T) {
	visit := run{start: 1000, end: 2000, alive: 2500, hash: 77, pageviews: 2, entry: "/", exit: "/b",
		entryT: 1000, exitT: 2000, closed: true, evHours: []hourCount{{h: 3, pv: 2}},
		marks: []mark{{dim: "p", val: "/b", hour: 5, engaged: true, engHour: 6, maxDepth: 40}}}
	plain := appendVisitorState(nil, []run{visit})
	withLink := appendVisitorState(nil, []run{visit, {start: 3000, end: 3000, alive: 3000, next: 99}})
	if len(withLink) <= len(plain) || string(withLink[:len(plain)]) != string(plain) {
		t.Fatalf("got %x; want %x followed by the links", withLink, plain)
	}
	runs, err := decodeVisitorState(withLink, nil)
	if err != nil {
		t.Fatalf("decodeVisitorState: %v", err)
	}
	if len(runs) != 2 || runs[1].next != 99 || runs[1].end != 3000 {
		t.Fatalf("got %+v; want the visit and a link to 99 ending at 3000", runs)
	}
	got := runs[0]
	if got.start != visit.start || got.end != visit.end || got.alive != visit.alive || got.hash != visit.hash ||
		got.entry != visit.entry || got.exit != visit.exit || !got.closed || len(got.evHours) != 1 || got.evHours[0] != visit.evHours[0] ||
		len(got.marks) != 1 || got.marks[0] != visit.marks[0] {
		t.Errorf("visit: got %+v; want %+v", got, visit)
	}
	for _, bad := range [][]byte{append(plain, 0), append(plain, 1, 0, 2), append(plain, 1), plain[:len(plain)-1]} {
		if _, err := decodeVisitorState(bad, nil); err == nil {
			t.Errorf("decodeVisitorState(%x): got no error; want one", bad)
		}
	}
}
