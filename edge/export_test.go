package edge

import (
	"testing"

	"github.com/waymark/waymark/store"
)

// NewBenchServer is benchServer for the external test package (the click
// capture benchmark, which needs the ingest pipeline: edge itself never
// imports ingest).
func NewBenchServer(tb testing.TB, cfg Config) *Server {
	srv, _ := benchServer(tb, cfg)
	return srv
}

// RaceEnabled tells the external tests whether allocation counts hold.
const RaceEnabled = raceEnabled

// NewBenchServerWithLinks is NewBenchServer with more links stored (the
// redirect-rule tests and benchmarks).
func NewBenchServerWithLinks(tb testing.TB, cfg Config, links ...store.Link) *Server {
	srv, w := benchServer(tb, cfg)
	for _, l := range links {
		w.putLink(tb, l)
	}
	return srv
}
