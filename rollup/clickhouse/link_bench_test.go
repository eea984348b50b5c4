package clickhouse_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/internal/chserver"
	"github.com/waymark/waymark/rollup/clickhouse"
	"github.com/waymark/waymark/rollup/query"
)

// BenchmarkLinkQueries asks a busy link's questions (1.2M clicks over 30
// days from 300k visitors, about 1,700 an hour) of the embedded store,
// of ClickHouse from link rows (cold: a new Backend per question, so no
// cached row; warm: the same Backend again) and of ClickHouse from raw
// clicks, in the same run: the ratios are what to read. It logs what
// ClickHouse read for the link-row statements (system.query_log).
//
//	go test ./rollup/clickhouse/ -run '^$' -bench BenchmarkLinkQueries -benchtime 20x
func BenchmarkLinkQueries(b *testing.B) {
	chserver.Require(b)
	rng := rand.New(rand.NewPCG(3, 4))
	start := benchEnd.AddDate(0, 0, -30).UnixMilli()
	span := int64(30 * 24 * time.Hour / time.Millisecond)
	countries := []string{"DE", "US", "FR", "JP", "BR", "EE", "IN", "GB"}
	evs := make([]ingest.Event, 0, 1_200_000)
	for i := range 1_200_000 {
		var id [16]byte
		for k := range 8 {
			id[15-k] = byte(uint64(i+1) >> (8 * k))
		}
		evs = append(evs, ingest.Event{Kind: ingest.KindClick, ID: id, Time: start + rng.Int64N(span), Code: "busy",
			VisitorHash: rng.Uint64N(300_000)*0x9E3779B97F4A7C15 + 1, Country: countries[rng.IntN(len(countries))], Node: "e1"})
	}
	slicesSortByTime(evs)
	emb, ch := loadBenchWorld(b, evs, 50_000, "linkbench")
	cfg := clickhouse.BackendConfig{Now: benchNow}
	raw := clickhouse.NewBackend(ch.Client(), clickhouse.BackendConfig{Now: benchNow, NoRows: true})
	cold := coldBackend{func() query.Backend { return clickhouse.NewBackend(ch.Client(), cfg) }}
	warm := clickhouse.NewBackend(ch.Client(), cfg)
	r := query.Range{From: benchEnd.AddDate(0, 0, -30), To: benchEnd, Loc: time.UTC}
	for _, be := range []struct {
		name string
		b    func() query.Backend
	}{
		{"embedded", func() query.Backend { return emb }},
		{"clickhouse-cold", cold.new},
		{"clickhouse-warm", func() query.Backend { return warm }},
		{"clickhouse-raw", func() query.Backend { return raw }},
	} {
		for _, q := range []struct {
			name string
			run  func(query.Backend) error
		}{
			{"link-series-30d", func(x query.Backend) error { _, err := x.LinkStats("busy", r, query.Day); return err }},
			{"link-breakdown-country", func(x query.Backend) error {
				_, err := x.LinkBreakdown("busy", "country", r, 10)
				return err
			}},
		} {
			b.Run(be.name+"/"+q.name, func(b *testing.B) {
				b.ReportAllocs()
				reportPercentiles(b, func() error { return q.run(be.b()) })
			})
		}
	}
	logLinkRowReads(b, ch.Client())
}

type coldBackend struct{ make func() query.Backend }

func (c coldBackend) new() query.Backend { return c.make() }

// logLinkRowReads logs what the statements over link_rows read.
func logLinkRowReads(b *testing.B, c *clickhouse.Client) {
	ctx := context.Background()
	if err := c.Exec(ctx, "SYSTEM FLUSH LOGS"); err != nil {
		b.Logf("no query log: %v", err)
		return
	}
	res, err := c.Query(ctx, "SELECT count(), max(read_rows), max(read_bytes), max(memory_usage), quantile(0.5)(query_duration_ms), max(query_duration_ms) "+
		"FROM system.query_log WHERE type = 2 AND query LIKE '%FROM link_rows%' AND query NOT LIKE '%query_log%'")
	if err != nil {
		b.Logf("no query log: %v", err)
		return
	}
	b.Logf("link_rows statements: count, max read_rows, max read_bytes, max memory, p50 ms, max ms: %s", res.Data)
}
