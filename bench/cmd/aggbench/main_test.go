package main

import (
	"io"
	"testing"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

func TestParseFlagsRejects(t *testing.T) {
	for _, args := range [][]string{
		{"-targets", "node,mysql"}, {"-targets", "node,node"}, {"-events", "0"}, {"-days", "0"},
		{"-sites", "0", "-links", "0"}, {"-click-share", "2"}, {"-segment-events", "0"},
		{"-server-cpu", "1", "-load-cpu", "1"}, {"stray"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) succeeded; want an error", args)
		}
	}
}

// TestRunNodeAndClickHouse feeds a small stream to the real binary and to
// a real ClickHouse, and checks both hold every event and are gone after.
func TestRunNodeAndClickHouse(t *testing.T) {
	bin := harness.BuildWaymark(t)
	if _, err := harness.FindClickHouse(""); err != nil {
		t.Fatal(err)
	}
	// One day: every event inside the node's late window, so all of them
	// are rolled up.
	args := []string{"-waymark", bin, "-events", "20000", "-days", "1", "-sites", "3", "-links", "20",
		"-visitors", "2000", "-pages", "50", "-segment-events", "1000", "-segments-per-batch", "4", "-ch-batch", "7000"}
	var rep Report
	harness.RunCommand(t, args, 2*time.Minute, parseFlags, run, &rep)
	if rep.Generated != 20000 || len(rep.Sinks) != 2 {
		t.Fatalf("generated %d, %d sinks; want 20000 and 2", rep.Generated, len(rep.Sinks))
	}
	for _, s := range rep.Sinks {
		if !s.CountOK || s.Counted != 20000 || s.EventsPerSecond <= 0 || s.CPUMicrosPerEvent <= 0 {
			t.Errorf("%s: counted %d (ok %v), %.0f events/s, %.2f µs/event; want all 20000 at a rate", s.Target, s.Counted, s.CountOK, s.EventsPerSecond, s.CPUMicrosPerEvent)
		}
		// 20000 events of 1000 per segment, 4 segments per batch: 5 posts;
		// 7000 rows per INSERT: 3 inserts.
		if want := map[string]int{sinkNode: 5, sinkClickHouse: 3}[s.Target]; s.Batches != want {
			t.Errorf("%s: %d batches; want %d", s.Target, s.Batches, want)
		}
		if !harness.ProcessGone(s.Pid) {
			t.Errorf("%s: process %d still exists after the run", s.Target, s.Pid)
		}
	}
	if node := rep.Sinks[0]; node.Stored != 20000 || node.Late > 100 {
		t.Errorf("node stored %d, %d late; want 20000, (almost) none late", node.Stored, node.Late)
	}
	if rep.NodeToClickHouse <= 0 {
		t.Errorf("ratio %v; want positive", rep.NodeToClickHouse)
	}
}
