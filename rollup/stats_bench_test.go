package rollup

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
)

// BenchmarkRollupThroughput applies batches of 4,000 fresh events (70 %
// pageviews, engagement and custom events of 1,000 visitors of 5 sites,
// 30 % clicks on 100 links, 5 % bots) through apply: dedup, raw storage,
// visits, hour and day rows, sketches, one fsynced commit per batch.
func BenchmarkRollupThroughput(b *testing.B) {
	const perBatch = 4000
	clock := &testClock{now: base}
	a, err := Open(testConfig(&testing.T{}, b.TempDir(), clock))
	if err != nil {
		b.Fatalf("Open: %v", err)
	}
	defer a.Close()
	events := make([]ingest.Event, perBatch)
	seg := &verifiedSegment{}
	n := 0
	fill := func(batch int) {
		seg.payloads, seg.events = seg.payloads[:0], seg.events[:0]
		for i := range events {
			n++
			t := base.Add(-time.Hour + time.Duration(batch%3600)*time.Second + time.Duration(i)*time.Millisecond)
			var ev ingest.Event
			if i%10 < 3 {
				ev = click("tp", n, fmt.Sprintf("code%03d", i%100), t, i%20 == 0)
				ev.VisitorHash = mix64(uint64(n % 50000))
			} else {
				ev = pageview("tp", n, fmt.Sprintf("site%d", i%5), t, i%20 == 1)
				ev.VisitorHash = mix64(uint64(i % 1000))
				ev.Path = fmt.Sprintf("/p%d", i%50)
				ev.Country = genCountries[i%len(genCountries)]
				switch i % 10 {
				case 7:
					ev.Kind, ev.Name, ev.EngagedMS, ev.ScrollDepth = ingest.KindEngagement, "engagement", 30000, 50
				case 8:
					ev.Kind, ev.Name = ingest.KindCustom, "signup"
				}
			}
			appendBenchEvent(seg, ev)
		}
		seg.ref = ingest.SegmentRef{Node: "edge-1", Seq: uint64(batch + 1)}
	}
	runApplyBench(b, a, seg, fill, perBatch)
}

// seedRollups writes 30 days of rollups through the real delta and merge
// path, the way apply would leave them for an entity with perDay events a
// day spread over values values of dim: each day has 40,000 distinct
// visitors in total (dense sketches) and 50 per value (visitor lists),
// which is what a query's cost depends on; seeding does not fold 30
// million events.
func seedRollups(b *testing.B, a *Aggregator, kind byte, entity string, dim byte, values int, perDay int64, start time.Time) {
	h0 := hourOf(start.UnixMilli())
	for d := range uint32(30) {
		dl := newDelta()
		ent := dl.ent(kind, entity)
		total := dl.val("")
		for hh := range uint32(24) {
			h := h0 + d*24 + hh
			c := dl.cell(cellKey{ent, dimTotal, total, h})
			c[fCount] = perDay / 24
			c[fVisits] = c[fCount] / 3
			for i := range uint32(40000 / 24) {
				dl.visitorAt(ent, dimTotal, total, h, uint64(d)<<32|uint64(hh*2000+i))
			}
			for v := range values {
				val := dl.val(fmt.Sprintf("/page/%04d", v))
				vc := dl.cell(cellKey{ent, uint32(dim), val, h})
				vc[fCount] = c[fCount] / int64(values)
				vc[fVisits] = vc[fCount] / 3
				for i := range 2 {
					dl.visitorAt(ent, uint32(dim), val, h, uint64(v)<<40|uint64(d*24+hh)<<8|uint64(i))
				}
			}
		}
		batch := a.db.NewBatch()
		if err := dl.flush(batch, nil, nil); err != nil {
			b.Fatal(err)
		}
		if err := batch.Commit(pebble.NoSync); err != nil {
			b.Fatal(err)
		}
		batch.Close()
	}
	if err := a.db.Flush(); err != nil {
		b.Fatal(err)
	}
}

func openSeeded(b *testing.B, dim byte, values int) (*Aggregator, query.Range) {
	a, err := Open(testConfig(&testing.T{}, b.TempDir(), &testClock{now: base}))
	if err != nil {
		b.Fatalf("Open: %v", err)
	}
	b.Cleanup(func() { a.Close() })
	ny := mustLoc(b, genTZ)
	if os.Getenv("QUERY_TZ") == "UTC" {
		ny = time.UTC
	}
	start := time.Date(2026, 10, 31, 0, 0, 0, 0, ny)
	seedRollups(b, a, kindLink, "big", dimCountry, 50, 1_000_000, start.Add(-24*time.Hour))
	seedRollups(b, a, kindSite, "bigsite", dim, values, 1_000_000, start.Add(-24*time.Hour))
	return a, query.Range{From: start, To: start.AddDate(0, 0, 30), Loc: ny}
}

// BenchmarkQuery30Days: a link with 1,000,000 clicks a day and a site
// with 1,000,000 pageviews a day over 1,000 pages, 30 days in New York
// time (so the range's two ragged ends come from hour rows).
func BenchmarkQuery30Days(b *testing.B) {
	a, r := openSeeded(b, dimPage, 1000)
	b.Run("link-series-day", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			st, err := a.LinkStats("big", r, query.Day)
			if err != nil || st.Totals.Clicks < 28_000_000 {
				b.Fatalf("LinkStats: %v %+v", err, st.Totals)
			}
		}
	})
	b.Run("link-series-hour", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := a.LinkStats("big", r, query.Hour); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("link-breakdown-country", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := a.LinkBreakdown("big", "country", r, 10); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("site-timeseries-day", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := a.SiteTimeseries("bigsite", r, query.Day, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("site-breakdown-page", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			bd, err := a.SiteBreakdown("bigsite", "page", r, 10, nil)
			if err != nil || len(bd.Results) != 10 {
				b.Fatalf("SiteBreakdown: %v", err)
			}
		}
	})
}

// BenchmarkVisitorMemory reports what a million active visitors cost: the
// stored visitor state (Pebble, bytes per visitor with one two-page
// visit) and the Go heap of one apply's working set holding them all.
func BenchmarkVisitorMemory(b *testing.B) {
	const visitors = 50_000
	b.ReportAllocs()
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		src := newFreshStates()
		f := newFolder(src)
		var stored int
		for v := range visitors {
			for p := range 2 {
				ev := pageview("mem", v*2+p, "site1", base.Add(time.Duration(p)*time.Minute), false)
				ev.VisitorHash = mix64(uint64(v))
				ev.ReferrerHost, ev.Country, ev.Device, ev.Browser, ev.OS = "www.google.com", "DE", "desktop", "Firefox", "Linux"
				if _, err := f.fold(&ev); err != nil {
					b.Fatal(err)
				}
			}
		}
		runtime.ReadMemStats(&after)
		for k, st := range src.m {
			stored += len(appendVisitKey(nil, k.day, "site1", k.hash)) + len(appendVisitorState(nil, st.runs))
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/visitors*1e6/(1<<20), "heap-MiB/1M-visitors")
		b.ReportMetric(float64(stored)/visitors*1e6/(1<<20), "stored-MiB/1M-visitors")
		runtime.KeepAlive(f)
	}
}
