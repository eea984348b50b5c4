package api

import (
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup"
	"github.com/waymark/waymark/rollup/internal/world"
)

// The API's tests run over the embedded backend (rollup) fed with the
// generated world (rollup/internal/world) and compare with its reference.

const shipToken = "test-token"

func worldNow() time.Time { return world.Base }

// feedWorld stores w's events in a fresh embedded aggregator, shipped as
// segments of 97 events, three to a batch, through its real receiver.
func feedWorld(t *testing.T, w *world.World) *rollup.Aggregator {
	t.Helper()
	a, err := rollup.Open(rollup.Config{
		Dir: t.TempDir(), Token: shipToken, Logger: slog.New(slog.DiscardHandler),
		Metrics: metrics.NewSet(), Now: worldNow,
	})
	if err != nil {
		t.Fatalf("rollup.Open: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	receiver := world.Serve(t, a.SegmentsHandler())
	segs := w.Segments("edge-1", 97)
	for i := 0; i < len(segs); i += 3 {
		var bs []ingest.BatchSegment
		for _, raw := range segs[i:min(i+3, len(segs))] {
			bs = append(bs, ingest.BatchSegment{Ref: world.SegmentRef(raw), Data: raw})
		}
		req := fasthttp.AcquireRequest()
		req.SetRequestURI(receiver + ingest.ShipPath)
		req.Header.SetMethod(http.MethodPost)
		req.Header.Set("Authorization", "Bearer "+shipToken)
		req.Header.Set("Content-Encoding", "zstd")
		req.Header.SetContentType(ingest.ShipContentType)
		req.SetBody(world.EncodeBatch(t, bs))
		resp := fasthttp.AcquireResponse()
		err := fasthttp.Do(req, resp)
		status := resp.StatusCode()
		fasthttp.ReleaseRequest(req)
		fasthttp.ReleaseResponse(resp)
		if err != nil || status != http.StatusOK {
			t.Fatalf("ship segments %d..: status %d, %v; want 200", i, status, err)
		}
	}
	return a
}

// startStats serves the stats API over a with the world's owners.
func startStats(t *testing.T, a *rollup.Aggregator) string {
	t.Helper()
	return world.Serve(t, StatsHandler(a, world.Auth{}, Config{Now: worldNow, Logger: slog.New(slog.DiscardHandler)}))
}
