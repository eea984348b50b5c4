package clickhouse

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
)

// benchSegment is a segment of n varied site events and clicks.
func benchSegment(seq uint64, n int) []byte {
	evs := make([]ingest.Event, n)
	pages := []string{"/", "/pricing", "/docs/getting-started", "/blog/2025/launch", "/signup"}
	for i := range evs {
		t := at(0, 0, 0, 0, 0) + int64(i)*50
		if i%4 == 0 {
			evs[i] = click(fmt.Sprintf("lnk%03d", i%200), t, uint64(i%5000), i%10 == 0)
		} else {
			evs[i] = siteEvent(ingest.KindPageview, "pageview", t, uint64(i%7000), false)
			evs[i].SiteID = fmt.Sprintf("site%02d", i%20)
			evs[i].Path = pages[i%len(pages)]
			evs[i].ReferrerHost = "www.google.com"
			evs[i].Browser, evs[i].BrowserVersion, evs[i].OS, evs[i].OSVersion = "Firefox", "120.0", "Linux", ""
			evs[i].Device, evs[i].Subdivision, evs[i].City = "desktop", "EE-37", "588409"
		}
		evs[i].ID[12], evs[i].ID[13], evs[i].ID[14] = byte(i>>16), byte(i>>8), byte(i)
	}
	return segment("bench", seq, evs)
}

// BenchmarkInsertPath stores segments of 100k events through
// StoreSegment (verify, decode, RowBinary, insert, identity) and, in the
// same iteration, inserts the same rows as ClickHouse's own TabSeparated
// (exported from the first table) into a second events table: the
// client's rate against the server's raw insert rate, in one run.
func BenchmarkInsertPath(b *testing.B) {
	srv := sharedServer(b)
	c := newClient(b, srv)
	raw := newClient(b, srv)
	const n = 100_000
	ctx := context.Background()
	// ClickHouse's own TSV of one segment's rows.
	if _, err := c.StoreSegment(ctx, benchSegment(0, n)); err != nil {
		b.Fatal(err)
	}
	tsv, err := srv.Query(ctx, "SELECT * FROM "+c.Database()+".events FORMAT TabSeparated")
	if err != nil {
		b.Fatal(err)
	}
	if got := strings.Count(tsv, "\n"); got != n {
		b.Fatalf("exported %d rows; want %d", got, n)
	}
	segs := make([][]byte, b.N)
	for i := range segs {
		segs[i] = benchSegment(uint64(i+1), n)
	}
	var client, server time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if res, err := c.StoreSegment(ctx, segs[i]); err != nil || res.Outcome != Stored {
			b.Fatalf("StoreSegment: %+v, %v", res, err)
		}
		t1 := time.Now()
		if err := raw.Insert(ctx, "INSERT INTO events FORMAT TabSeparated", bytes.NewReader([]byte(tsv)), nil); err != nil {
			b.Fatal(err)
		}
		client += t1.Sub(t0)
		server += time.Since(t1)
	}
	b.StopTimer()
	iters := float64(b.N)
	b.ReportMetric(iters*n/client.Seconds(), "client-events/s")
	b.ReportMetric(iters*n/server.Seconds(), "raw-tsv-events/s")
	b.ReportMetric(server.Seconds()/client.Seconds(), "client/raw")
}

// BenchmarkEncodeSegment is StoreSegment's work on this side of the
// wire: verify and decode the segment, encode its RowBinary rows.
func BenchmarkEncodeSegment(b *testing.B) {
	seg := benchSegment(1, 100_000)
	b.ReportAllocs()
	b.SetBytes(int64(len(seg)))
	ref := ingest.SegmentRef{Node: "bench", Inc: 1, Seq: 1}
	for b.Loop() {
		if e := encodeRows(seg, ref, discard{}, 0); e.err != nil || e.rows != 100_000 {
			b.Fatalf("encodeRows: %+v", e)
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkFinalCost is what reading with FINAL (the exactly-once rule)
// costs a site's 30-day daily series over 1M stored events, against the
// same query without it, alternating in one run.
func BenchmarkFinalCost(b *testing.B) {
	c := newClient(b, sharedServer(b))
	ctx := context.Background()
	for seq := range 10 {
		if _, err := c.StoreSegment(ctx, benchSegment(uint64(seq+1), 100_000)); err != nil {
			b.Fatal(err)
		}
	}
	q := func(final string) string {
		return "SELECT toDate(time) AS d, countIf(kind = 2), uniqCombined(visitor) FROM events" + final +
			" WHERE site = 'site07' AND code = '' AND time >= " + DateTime(dec1.AddDate(0, 0, -29)) +
			" AND time < " + DateTime(dec1.AddDate(0, 0, 1)) + " GROUP BY d ORDER BY d"
	}
	var withFinal, without time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if _, err := c.Query(ctx, q(" FINAL")); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := c.Query(ctx, q("")); err != nil {
			b.Fatal(err)
		}
		withFinal += t1.Sub(t0)
		without += time.Since(t1)
	}
	b.ReportMetric(withFinal.Seconds()/without.Seconds(), "final/plain")
}
