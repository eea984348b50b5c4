package node

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/internal/chserver"
	"github.com/waymark/waymark/rollup/clickhouse"
)

// chBenchSegment is a segment of n events, a quarter of them clicks (on
// 50 links), the rest pageviews of 20 sites.
func chBenchSegment(seq uint64, n int) []byte {
	evs := make([]ingest.Event, n)
	t0 := time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	for i := range evs {
		ev := &evs[i]
		ev.Time, ev.VisitorHash, ev.Node, ev.Country = t0+int64(i)*50, uint64(i%5000), "bench", "EE"
		if i%4 == 0 {
			ev.Kind, ev.Code = ingest.KindClick, fmt.Sprintf("lnk%03d", i%200)
		} else {
			ev.Kind, ev.Name, ev.SiteID, ev.Path = ingest.KindPageview, "pageview", fmt.Sprintf("site%02d", i%20), "/docs/getting-started"
			ev.ReferrerHost, ev.Browser, ev.OS, ev.Device = "www.google.com", "Firefox", "Linux", "desktop"
		}
		ev.ID[0], ev.ID[12], ev.ID[13], ev.ID[14] = byte(seq), byte(i>>16), byte(i>>8), byte(i)
	}
	return ingest.BuildSegment(ingest.SegmentRef{Node: "bench", Inc: 1, Seq: seq}, time.UnixMilli(t0), evs)
}

// BenchmarkCHStoreClickShare: what reading a segment's clicks adds to
// storing it in a real ClickHouse: 100k-event segments stored by
// StoreSegment alone and after segmentClickCodes (click limits: codes)
// or segmentClicks (link.clicked too: decoded clicks), alternating in
// one run.
//
//	go test ./node/ -run '^$' -bench BenchmarkCHStoreClickShare -benchtime 6x
func BenchmarkCHStoreClickShare(b *testing.B) {
	srv := chserver.StartT(b)
	b.Run("codes", func(b *testing.B) { benchCHStoreClicks(b, srv, false) })
	b.Run("webhooks", func(b *testing.B) { benchCHStoreClicks(b, srv, true) })
}

var benchDB atomic.Int64

// benchCHStoreClicks: webhooks decodes every click (some owner has a
// link.clicked webhook); otherwise only the codes are read.
func benchCHStoreClicks(b *testing.B, srv *chserver.Server, webhooks bool) {
	c, err := clickhouse.New(clickhouse.Config{URL: srv.URL(), Database: fmt.Sprintf("bench%d", benchDB.Add(1))})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	be := clickhouse.NewBackend(c, clickhouse.BackendConfig{})
	const n = 100_000
	segs := make([][]byte, 2*b.N)
	for i := range segs {
		segs[i] = chBenchSegment(uint64(i+1), n)
	}
	var plain, with, decode time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := be.StoreSegment(ctx, segs[2*i]); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if webhooks {
			if len(segmentClicks(segs[2*i+1])) != n/4 {
				b.Fatal("clicks missing")
			}
		} else if len(segmentClickCodes(segs[2*i+1])) != 50 {
			b.Fatal("codes missing")
		}
		t2 := time.Now()
		if _, err := be.StoreSegment(ctx, segs[2*i+1]); err != nil {
			b.Fatal(err)
		}
		plain += t1.Sub(t0)
		with += time.Since(t1)
		decode += t2.Sub(t1)
	}
	b.StopTimer()
	b.ReportMetric(float64(decode.Nanoseconds())/float64(b.N*n), "decode-ns/event")
	// decode/store: the reading's time against a store's of the same
	// size (with/plain moves by more than that on a busy machine).
	b.ReportMetric(decode.Seconds()/plain.Seconds(), "decode/store")
	b.ReportMetric(with.Seconds()/plain.Seconds(), "with/plain")
}
