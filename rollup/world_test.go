package rollup

import (
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/api"
	"github.com/waymark/waymark/rollup/internal/world"
)

// The generated world (rollup/internal/world) under the names the tests
// of this package use.
const (
	genCode = world.Code
	genSite = world.Site
	genTZ   = world.TZ
)

var genCountries = world.Countries

type (
	genWorld = world.World
	refSite  = world.RefSite
)

func generate(seed uint64) *genWorld { return world.Generate(seed) }

func genHash(v int, d uint64) uint64 { return world.Hash(v, d) }

func hllBound(n int64) float64 { return world.HLLBound(n) }

func wantEstimate(t *testing.T, what string, got uint64, want int64) {
	t.Helper()
	world.WantEstimate(t, what, got, want)
}

func wantEqual[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	world.WantEqual(t, what, got, want)
}

func mustLoc(t testing.TB, name string) *time.Location {
	t.Helper()
	return world.MustLoc(t, name)
}

// testAuth is the world's two owners (world.Auth).
type testAuth = world.Auth

func call(t *testing.T, method, url, key, body string) (int, string, []byte) {
	t.Helper()
	return world.Call(t, method, url, key, body)
}

func segmentRef(seg []byte) ingest.SegmentRef { return world.SegmentRef(seg) }

func encodeBatch(t testing.TB, bs []ingest.BatchSegment) []byte {
	t.Helper()
	return world.EncodeBatch(t, bs)
}

// startStats serves the stats API (rollup/api) over a.
func startStats(t *testing.T, a *Aggregator) string {
	t.Helper()
	return world.Serve(t, api.StatsHandler(a, testAuth{}, api.Config{Now: a.cfg.Now, Logger: a.log}))
}

// The world's model is the aggregator's.
func TestWorldMatchesModel(t *testing.T) {
	if world.VisitGapMS != visitGapMS || world.SketchPrecision != sketchPrecision {
		t.Fatalf("world: visit gap %d ms, precision %d; rollup: %d ms, %d",
			world.VisitGapMS, world.SketchPrecision, visitGapMS, sketchPrecision)
	}
	for _, x := range []uint64{0, 1, 77, 1 << 40, ^uint64(0)} {
		if world.Mix64(x) != mix64(x) {
			t.Fatalf("world.Mix64(%d) = %d; rollup's mix64 gives %d", x, world.Mix64(x), mix64(x))
		}
	}
	if !world.Base.Equal(base) {
		t.Fatalf("world.Base %v; the tests' base %v", world.Base, base)
	}
}
