package rollup

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/internal/chserver"
	"github.com/waymark/waymark/rollup/clickhouse"
)

// TestStoreHandlerIntoClickHouse: the receiver of a ClickHouse
// aggregator over a real clickhouse-server answers as the embedded one:
// stored and repeated segments acknowledged (counted once), a segment
// whose header is not the one its frame names and a reused identity
// refused for good, parts taken like segments, and 503 with nothing
// acknowledged while ClickHouse is down.
func TestStoreHandlerIntoClickHouse(t *testing.T) {
	srv := chserver.StartT(t)
	c, err := clickhouse.New(clickhouse.Config{URL: srv.URL(), Database: "recv"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	b := clickhouse.NewBackend(c, clickhouse.BackendConfig{})
	h := StoreHandler(StoreHandlerConfig{Token: testToken, Store: func(ctx context.Context, raw []byte) (StoreVerdict, error) {
		_, err := b.StoreSegment(ctx, raw)
		switch {
		case err == nil:
			return StoreAcked, nil
		case errors.Is(err, clickhouse.ErrConflict):
			return StoreConflict, nil
		case errors.Is(err, ingest.ErrCorruptSegment):
			return StoreMalformed, nil
		}
		return 0, err
	}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fs := &fasthttp.Server{Handler: h, MaxRequestBodySize: 64 << 20}
	go fs.Serve(ln)
	t.Cleanup(func() { fs.Shutdown() })
	s := &testServer{url: "http://" + ln.Addr().String()}

	day := base.Add(-time.Minute)
	one := segmentBytes("edge-1", 1, click("a", 1, "abc", day, false), click("a", 2, "abc", day, false), click("a", 3, "xyz", day, false))
	two := segmentBytes("edge-1", 2, click("a", 4, "abc", day, false))
	again := segmentBytes("edge-1", 2, click("a", 5, "abc", day, false)) // seq 2, other bytes
	res := s.post(t, testToken, "", ingest.AppendBatch(nil, []ingest.BatchSegment{
		{Ref: segmentRef(one), Data: one},
		{Ref: ingest.SegmentRef{Node: "edge-1", Inc: segmentRef(two).Inc, Seq: 9}, Data: two}, // frame says 9, header 2
	}))
	if res.status != http.StatusOK || len(res.acked) != 1 || res.acked[0] != segmentRef(one) ||
		len(res.rejected) != 1 || res.rejected[0].Reason != ingest.RejectMalformed || res.rejected[0].Seq != 9 {
		t.Fatalf("first batch: %+v; want one acked, seq 9 malformed", res)
	}
	wantAcked(t, s.ship(t, one, two), []ingest.SegmentRef{segmentRef(one), segmentRef(two)})
	res = s.post(t, testToken, "", ingest.AppendBatch(nil, []ingest.BatchSegment{{Ref: segmentRef(again), Data: again}}))
	if res.status != http.StatusOK || len(res.acked) != 0 || len(res.rejected) != 1 || res.rejected[0].Reason != ingest.RejectConflict {
		t.Fatalf("a reused identity: %+v; want a conflict", res)
	}
	// A part of a third segment, then the same part again.
	var sp ingest.Splitter
	subs, err := sp.Split(segmentBytes("edge-2", 1, click("b", 1, "abc", day, false), click("b", 2, "xyz", day, false)), nil)
	if err != nil {
		t.Fatal(err)
	}
	var parts []ingest.BatchSegment
	for _, p := range subs {
		parts = append(parts, ingest.BatchSegment{Ref: p.Ref, Data: p.Data})
	}
	for range 2 {
		res = s.post(t, testToken, "", ingest.AppendBatch(nil, parts))
		if res.status != http.StatusOK || len(res.acked) != len(parts) {
			t.Fatalf("parts: %+v; want all %d acked", res, len(parts))
		}
	}
	from := time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, time.UTC)
	st, err := c.LinkStats(ctx, "abc", from, from.AddDate(0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	// By hand: abc has 2 clicks in seq 1, 1 in seq 2 (the conflicting
	// copy not stored), 1 in edge-2's part.
	if st.Totals.Clicks != 4 {
		t.Fatalf("abc: %d clicks; want 4", st.Totals.Clicks)
	}
	if s.post(t, "wrong", "", ingest.AppendBatch(nil, parts)).status != http.StatusUnauthorized {
		t.Fatal("a wrong token was let in")
	}

	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	three := segmentBytes("edge-1", 3, click("a", 6, "abc", day, false))
	if res := s.post(t, testToken, "", ingest.AppendBatch(nil, []ingest.BatchSegment{{Ref: segmentRef(three), Data: three}})); res.status != http.StatusServiceUnavailable {
		t.Fatalf("ClickHouse down: %+v; want 503", res)
	}
}
