package rollup

import (
	"encoding/binary"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/ingest"
)

// BenchmarkReceiveBatch posts zstd batches of fresh segments (4 segments of
// 1,000 events: clicks over 100 codes and pageviews of 10 sites, 5 % bots)
// through the handler, with every commit fsynced, and reports events
// stored per second.
func BenchmarkReceiveBatch(b *testing.B) {
	const segments, perSegment = 4, 1000
	clock := &testClock{now: base}
	cfg := testConfig(&testing.T{}, b.TempDir(), clock)
	a, err := Open(cfg)
	if err != nil {
		b.Fatalf("Open: %v", err)
	}
	defer a.Close()
	handler := a.SegmentsHandler()

	events := make([]ingest.Event, perSegment)
	for i := range events {
		t := base.Add(-time.Duration(i) * time.Second)
		if i%2 == 0 {
			events[i] = click("bench", i, fmt.Sprintf("code%03d", i%100), t, i%20 == 0)
		} else {
			events[i] = pageview("bench", i, fmt.Sprintf("site%d", i%10), t, i%20 == 1)
		}
	}
	nextID := uint64(0)
	makeBody := func(seqBase uint64) []byte {
		var bs []ingest.BatchSegment
		for s := range uint64(segments) {
			for i := range events {
				nextID++
				binary.BigEndian.PutUint64(events[i].ID[8:], nextID)
			}
			raw := segmentBytes("edge-1", seqBase+s, events...)
			bs = append(bs, ingest.BatchSegment{Ref: segmentRef(raw), Data: raw})
		}
		return encodeBatch(b, bs)
	}

	var req fasthttp.Request
	var ctx fasthttp.RequestCtx
	remote := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		req.Reset()
		req.Header.SetMethod(fasthttp.MethodPost)
		req.SetRequestURI(ingest.ShipPath)
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Content-Encoding", "zstd")
		req.SetBody(makeBody(uint64(i) * segments))
		ctx.Init(&req, remote, nil)
		b.StartTimer()
		handler(&ctx)
		if ctx.Response.StatusCode() != fasthttp.StatusOK {
			b.Fatalf("status: got %d; want 200", ctx.Response.StatusCode())
		}
	}
	b.StopTimer()
	stored := a.m.eventsStored.Get()
	if want := uint64(b.N * segments * perSegment); stored != want {
		b.Fatalf("events stored: got %d; want %d", stored, want)
	}
	b.ReportMetric(float64(stored)/b.Elapsed().Seconds(), "events/s")
}
