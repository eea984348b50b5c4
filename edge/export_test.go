package edge

import "testing"

// NewBenchServer is benchServer for the external test package (the click
// capture benchmark, which needs the ingest pipeline: edge itself never
// imports ingest).
func NewBenchServer(tb testing.TB, cfg Config) *Server {
	srv, _ := benchServer(tb, cfg)
	return srv
}

// RaceEnabled tells the external tests whether allocation counts hold.
const RaceEnabled = raceEnabled
