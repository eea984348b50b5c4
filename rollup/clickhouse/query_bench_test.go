package clickhouse_test

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/internal/chserver"
	"github.com/waymark/waymark/rollup"
	"github.com/waymark/waymark/rollup/clickhouse"
	"github.com/waymark/waymark/rollup/query"
)

// BenchmarkQueries asks both backends the same questions over the same
// 30 days: one site's visits (about 1M events: pageviews, engagements,
// custom events) and one link's clicks (200k). Each backend in the same
// run, so the ratio is what to read.
//
//	go test ./rollup/clickhouse/ -run '^$' -bench BenchmarkQueries -benchtime 5x

var benchEnd = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func benchNow() time.Time { return benchEnd.Add(time.Hour) }

// benchEvents: 30 days, visits of 1 to 8 pageviews a minute or two apart,
// an engagement after most, a custom event in some; clicks from 20k
// visitors. About 1.0M site events and 200k clicks.
func benchEvents() []ingest.Event {
	rng := rand.New(rand.NewPCG(1, 2))
	start := benchEnd.AddDate(0, 0, -30).UnixMilli()
	span := int64(30 * 24 * time.Hour / time.Millisecond)
	pages := []string{"/", "/pricing", "/docs", "/blog/a", "/blog/b", "/signup", "/about", "/jobs"}
	countries := []string{"DE", "US", "FR", "JP", "BR", "EE", "IN", "GB"}
	refs := []string{"", "", "www.google.com", "news.ycombinator.com", "t.co", "duckduckgo.com"}
	var evs []ingest.Event
	n := uint64(0)
	id := func() [16]byte {
		n++
		var b [16]byte
		for i := range 8 {
			b[7-i] = byte(n >> (8 * i))
		}
		return b
	}
	for len(evs) < 1_000_000 {
		v := uint64(1 + rng.IntN(150_000))
		t := start + rng.Int64N(span-3600_000)
		country, ref := countries[rng.IntN(len(countries))], refs[rng.IntN(len(refs))]
		for p := range 1 + rng.IntN(8) {
			ev := ingest.Event{Kind: ingest.KindPageview, Name: "pageview", ID: id(), Time: t, SiteID: "bench",
				VisitorHash: v*31 + uint64(t/86_400_000), Path: pages[rng.IntN(len(pages))], Country: country,
				Device: "desktop", Browser: "Firefox", OS: "Linux", Node: "e1"}
			if p == 0 {
				ev.ReferrerHost = ref
			}
			evs = append(evs, ev)
			if rng.IntN(4) > 0 {
				e := ev
				e.ID, e.Kind, e.Name, e.Time, e.ReferrerHost = id(), ingest.KindEngagement, "engagement", t+30_000, ""
				e.EngagedMS, e.ScrollDepth = uint64(5_000+rng.IntN(60_000)), uint8(rng.IntN(101))
				evs = append(evs, e)
			}
			if rng.IntN(10) == 0 {
				e := ev
				e.ID, e.Kind, e.Name, e.Time, e.ReferrerHost = id(), ingest.KindCustom, "Signup", t+40_000, ""
				evs = append(evs, e)
			}
			t += 60_000 + rng.Int64N(60_000)
		}
	}
	for range 200_000 {
		evs = append(evs, ingest.Event{Kind: ingest.KindClick, ID: id(), Time: start + rng.Int64N(span), Code: "bench1",
			VisitorHash: uint64(1 + rng.IntN(20_000)), Country: countries[rng.IntN(len(countries))], Node: "e1"})
	}
	// An edge ships in time order.
	slicesSortByTime(evs)
	return evs
}

func slicesSortByTime(evs []ingest.Event) {
	slices.SortStableFunc(evs, func(a, b ingest.Event) int { return cmp.Compare(a.Time, b.Time) })
}

func setupBenchWorld(b *testing.B) (*rollup.Aggregator, *clickhouse.Backend, *clickhouse.Backend) {
	chserver.Require(b)
	emb, ch := loadBenchWorld(b, benchEvents(), 20_000, "bench")
	raw := clickhouse.NewBackend(ch.Client(), clickhouse.BackendConfig{Now: benchNow, NoRows: true})
	return emb, ch, raw
}

func BenchmarkQueries(b *testing.B) {
	emb, ch, raw := setupBenchWorld(b)
	r := query.Range{From: benchEnd.AddDate(0, 0, -30), To: benchEnd, Loc: time.UTC}
	for _, be := range []struct {
		name string
		b    query.Backend
	}{{"embedded", emb}, {"clickhouse", ch}, {"clickhouse-raw", raw}} {
		for _, q := range []struct {
			name string
			run  func(query.Backend) error
		}{
			{"link-series-30d", func(x query.Backend) error { _, err := x.LinkStats("bench1", r, query.Day); return err }},
			{"link-breakdown-country", func(x query.Backend) error {
				_, err := x.LinkBreakdown("bench1", "country", r, 10)
				return err
			}},
			{"site-series-30d", func(x query.Backend) error {
				_, err := x.SiteTimeseries("bench", r, query.Day, nil)
				return err
			}},
			{"site-breakdown-country", func(x query.Backend) error {
				_, err := x.SiteBreakdown("bench", "country", r, 10, nil)
				return err
			}},
		} {
			b.Run(be.name+"/"+q.name, func(b *testing.B) {
				reportPercentiles(b, func() error { return q.run(be.b) })
			})
		}
	}
}

// loadBenchWorld cuts evs into segments of size events, stores them in
// an embedded store and in a fresh ClickHouse database db (merged, as a
// day's parts are some time after it ends) and materializes its rows.
func loadBenchWorld(b *testing.B, evs []ingest.Event, size int, db string) (*rollup.Aggregator, *clickhouse.Backend) {
	var segs [][]byte
	for i, seq := 0, uint64(1); i < len(evs); i, seq = i+size, seq+1 {
		part := evs[i:min(i+size, len(evs))]
		segs = append(segs, ingest.BuildSegment(ingest.SegmentRef{Node: "e1", Inc: 1, Seq: seq}, time.UnixMilli(part[0].Time), part))
	}
	emb := feedEmbeddedWith(b, segs, rollup.Config{Now: benchNow, LateWindow: 40 * 24 * time.Hour})
	srv := chserver.StartT(b)
	ch := newBackend(b, srv, db, benchNow)
	storeAll(b, ch, segs)
	if err := ch.Client().Exec(context.Background(), "OPTIMIZE TABLE events FINAL"); err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	units, err := ch.MaterializeOnce(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d events in %d segments; %d units and link hours materialized in %s", len(evs), len(segs), units, time.Since(t0).Round(time.Millisecond))
	return emb, ch
}

// reportPercentiles times run b.N times and reports its p50 and p99.
func reportPercentiles(b *testing.B, run func() error) {
	took := make([]time.Duration, 0, b.N)
	for range b.N {
		t0 := time.Now()
		if err := run(); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(t0))
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[(len(took)*99)/100].Microseconds())/1000, "p99-ms")
}
