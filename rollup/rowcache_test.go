package rollup

import (
	"testing"
	"time"

	"github.com/waymark/waymark/rollup/query"
)

// TestRowCacheSeesLateUpdates: a finished hour's rowset, cached by a
// query, changes when a later batch changes it, even when that batch
// writes no visitor into the hour (a visit's second pageview takes back
// the bounce counted on its entry hour). By hand, for the hour 09:00 to
// 10:00: one visit that entered at 09:55 with one pageview; before the
// second pageview (10:10) it is a bounce (100%), after it it is not (0%),
// and the hour still has one pageview and one visitor.
func TestRowCacheSeesLateUpdates(t *testing.T) {
	clock := &testClock{now: base}
	a := openTest(t, testConfig(t, t.TempDir(), clock))
	srv := startServer(t, a)
	site := "rowcache"
	at := func(hm string) time.Time {
		d, err := time.Parse("15:04", hm)
		if err != nil {
			t.Fatal(err)
		}
		return time.Date(base.Year(), base.Month(), base.Day(), d.Hour(), d.Minute(), 0, 0, time.UTC)
	}
	first := pageview("rc", 1, site, at("09:55"), false)
	first.VisitorHash = 7
	srv.ship(t, segmentBytes("edge-rc", 1, first))

	hour := query.Range{From: at("09:00"), To: at("10:00")}
	ask := func(want float64) {
		t.Helper()
		for range 2 { // the second answer comes from the row cache
			m, err := a.SiteAggregate(site, hour, nil)
			if err != nil {
				t.Fatalf("SiteAggregate: %v", err)
			}
			if m.Pageviews != 1 || m.Visits != 1 || m.Visitors != 1 || m.BounceRate != want {
				t.Fatalf("hour 09: pageviews %d, visits %d, visitors %d, bounce rate %v; want 1, 1, 1, %v",
					m.Pageviews, m.Visits, m.Visitors, m.BounceRate, want)
			}
		}
	}
	ask(100)
	key := rowPrefix(nil, tabRows, granHour, hourOf(at("09:00").UnixMilli()), kindSite, site, "")
	if _, ok := a.sketches.getRow(key); !ok {
		t.Fatalf("the finished hour's rowset was not cached")
	}

	second := pageview("rc", 2, site, at("10:10"), false)
	second.VisitorHash = 7
	srv.ship(t, segmentBytes("edge-rc", 2, second))
	ask(0)
}

// TestRowCachePutAfterCommitRefused: a rowset read from an iterator opened
// before a commit is not cached once that commit has run.
func TestRowCachePutAfterCommitRefused(t *testing.T) {
	now := base
	c := newSketchCache(1<<20, func() time.Time { return now })
	key := rowPrefix(nil, tabRows, granHour, hourOf(base.Add(-3*time.Hour).UnixMilli()), kindSite, "s", "")
	seq := c.rowSeq()
	c.touch(key) // the hook reports rowset keys
	if err := c.commit(func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	c.putRow(key, []byte("stale"), seq)
	if _, ok := c.getRow(key); ok {
		t.Fatalf("a rowset read before a commit was cached after it")
	}
	c.putRow(key, []byte("fresh"), c.rowSeq())
	if v, ok := c.getRow(key); !ok || string(v) != "fresh" {
		t.Fatalf("getRow = %q, %v; want the rowset read after the commit", v, ok)
	}
	c.touch(key)
	if err := c.commit(func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.getRow(key); ok {
		t.Fatalf("a touched rowset stayed cached after its commit")
	}
}

// TestForgetAllDropsEverything: after forgetAll nothing cached before it
// is answered, rowsets nor ranges.
func TestForgetAllDropsEverything(t *testing.T) {
	now := base
	c := newSketchCache(1<<20, func() time.Time { return now })
	key := rowPrefix(nil, tabRows, granHour, hourOf(base.Add(-3*time.Hour).UnixMilli()), kindSite, "s", "")
	c.putRow(key, []byte("rows"), c.rowSeq())
	c.putRange("r", &cachedSet{estimate: 3, size: 64}, c.generation())
	if _, ok := c.getRow(key); !ok || c.getRange("r") == nil {
		t.Fatalf("setup: the rowset and the range should be cached")
	}
	c.forgetAll()
	if _, ok := c.getRow(key); ok {
		t.Errorf("a rowset survived forgetAll")
	}
	if c.getRange("r") != nil {
		t.Errorf("a range survived forgetAll")
	}
}
