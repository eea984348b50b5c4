package main

import (
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/waymark/waymark/bench/harness"
	"github.com/waymark/waymark/ingest"
)

func TestParseFlagsRejects(t *testing.T) {
	for _, args := range [][]string{
		{"-targets", "node,mysql"}, {"-targets", "node,node"}, {"-events", "0"}, {"-days", "0"},
		{"-sites", "0", "-links", "0"}, {"-click-share", "2"}, {"-segment-events", "0"},
		{"-server-cpu", "1", "-load-cpu", "1"}, {"stray"},
		{"-targets", "node-clickhouse,node-clickhouse"}, {"-targets", "node-clickhouse-3"}, {"-count-timeout", "0"},
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

func TestParseFlagsClickHouseTargets(t *testing.T) {
	cfg, err := parseFlags([]string{"-targets", "clickhouse,node-clickhouse,node-clickhouse-2", "-count-timeout", "5s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Sinks, []string{sinkClickHouse, sinkNodeClickHouse, sinkNodeClickHouse2}) || cfg.CountTimeout != 5*time.Second {
		t.Errorf("sinks %q, count timeout %v; want the three in order and 5s", cfg.Sinks, cfg.CountTimeout)
	}
	if aggregatorsOf(sinkNodeClickHouse) != 1 || aggregatorsOf(sinkNodeClickHouse2) != 2 || aggregatorsOf(sinkClickHouse) != 0 {
		t.Errorf("aggregators: %d, %d, %d; want 1, 2, 0", aggregatorsOf(sinkNodeClickHouse), aggregatorsOf(sinkNodeClickHouse2), aggregatorsOf(sinkClickHouse))
	}
}

// TestRunThroughClickHouseAggregators feeds a small stream to a raw
// ClickHouse insert, to one aggregator node in front of ClickHouse and to
// two (real binary, real clickhouse-server), and checks that ClickHouse
// counts every event once for each, that the two aggregators took the
// partitions the rule gives them, and that nothing is left running.
func TestRunThroughClickHouseAggregators(t *testing.T) {
	bin := harness.BuildWaymark(t)
	if _, err := harness.FindClickHouse(""); err != nil {
		t.Fatal(err)
	}
	const events = 20000
	args := []string{"-waymark", bin, "-targets", "clickhouse,node-clickhouse,node-clickhouse-2", "-events", fmt.Sprint(events), "-days", "1",
		"-sites", "3", "-links", "20", "-visitors", "2000", "-pages", "50", "-segment-events", "1000", "-segments-per-batch", "4", "-ch-batch", "7000"}
	var rep Report
	harness.RunCommand(t, args, 3*time.Minute, parseFlags, run, &rep)
	if rep.Generated != events || len(rep.Sinks) != 3 {
		t.Fatalf("generated %d, %d sinks; want %d and 3", rep.Generated, len(rep.Sinks), events)
	}
	for _, s := range rep.Sinks {
		if !s.CountOK || s.Counted != events || s.EventsPerSecond <= 0 || s.CPUMicrosPerEvent <= 0 {
			t.Errorf("%s: counted %d (ok %v), %.0f events/s, %.2f µs/event; want all %d at a rate", s.Target, s.Counted, s.CountOK, s.EventsPerSecond, s.CPUMicrosPerEvent, events)
		}
		if s.Target != sinkClickHouse && s.ToClickHouse <= 0 {
			t.Errorf("%s: ratio to the raw insert %v; want positive", s.Target, s.ToClickHouse)
		}
		if want := 1 + aggregatorsOf(s.Target); s.Target != sinkClickHouse && len(s.Processes) != want {
			t.Errorf("%s: %d processes; want ClickHouse and %d aggregators", s.Target, len(s.Processes), want-1)
		}
		for _, p := range append(s.Processes, ProcessUse{Pid: s.Pid}) {
			if !harness.ProcessGone(p.Pid) {
				t.Errorf("%s: process %d still exists after the run", s.Target, p.Pid)
			}
		}
	}
	// One aggregator: 20 whole segments in 5 posts of 4.
	if one := rep.Sinks[1]; one.Parts != 20 || one.Batches != 5 || len(one.Aggregators) != 0 {
		t.Errorf("node-clickhouse: %d segments in %d posts, %d shares; want 20 in 5, none", one.Parts, one.Batches, len(one.Aggregators))
	}
	// Two: each took the events of the partitions it owns. Without the
	// node target the run names its sites site0000.. and its links
	// c000000..; the same stream again, from the run's start.
	gen, err := harness.NewSpreadGen(harness.SpreadConfig{
		Seed: 1, Events: events, Start: rep.Config.Start, Days: 1, Visitors: 2000, Pages: 50, ClickShare: 0.4,
		Sites: []string{"site0000", "site0001", "site0002"}, Links: codes(20), Node: "aggbench-edge", Region: "local",
	})
	if err != nil {
		t.Fatal(err)
	}
	var owners [ingest.Partitions]int
	ingest.PartitionOwners([]string{"agg1", "agg2"}, &owners)
	var want [2]int
	var ev ingest.Event
	for gen.Next(&ev) {
		want[owners[ingest.PartitionOf(&ev)]]++
	}
	two := rep.Sinks[2]
	if len(two.Aggregators) != 2 || two.Aggregators[0].Events != want[0] || two.Aggregators[1].Events != want[1] {
		t.Fatalf("node-clickhouse-2 shares %+v; want agg1 %d and agg2 %d events", two.Aggregators, want[0], want[1])
	}
	if two.Parts <= 20 || two.Aggregators[0].Parts+two.Aggregators[1].Parts != two.Parts {
		t.Errorf("node-clickhouse-2: %d parts (%d + %d); want more than the 20 segments, the sum of the shares", two.Parts, two.Aggregators[0].Parts, two.Aggregators[1].Parts)
	}
}

func codes(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("c%06d", i)
	}
	return out
}
