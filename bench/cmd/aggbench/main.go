// Package main is the aggbench command. It feeds the same generated
// events (2,000,000 by default, a realistic spread over sites, links,
// pages, referrers and visitors across 30 days) to a Waymark node's
// aggregator, as sealed segments posted the way an edge ships them, and to
// a ClickHouse server it starts itself (a MergeTree table of the same
// fields, TabSeparated inserts over HTTP), and reports events/s for each
// and the node/ClickHouse ratio. Both servers run pinned to one CPU, one
// after the other; the generator runs on another.
//
// Issue 14's targets put the aggregators in front of ClickHouse:
// node-clickhouse is one `waymark node` with --analytics-store clickhouse
// against a fresh ClickHouse, node-clickhouse-2 two of them on one
// ClickHouse, the segments cut into partition parts and spread over them
// as an edge does (harness.ShipEventsSplit). Their figure runs from the
// first request to the moment ClickHouse counts every event (count()
// FROM events FINAL); each is also given as a ratio to the raw insert.
// ClickHouse and the aggregators share -server-cpu.
//
// Usage:
//
//	aggbench [-waymark bin/waymark] [-events 2000000] [-days 30]
//	         [-sites 20] [-links 2000] [-visitors 100000] [-out FILE]
//	         [-targets node,clickhouse,node-clickhouse,node-clickhouse-2]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	harness.ExitOnFlagError(err)
	harness.PinSelfOrExit("aggbench", cfg.Pin, cfg.LoadCPU)
	harness.RunMain("aggbench", nil, func(ctx context.Context) error {
		return run(ctx, cfg, os.Stdout)
	})
}

// Sinks.
const (
	sinkNode       = "node"
	sinkClickHouse = "clickhouse"
	// One and two `waymark node` aggregators with --analytics-store
	// clickhouse, in front of a ClickHouse the run starts for them.
	sinkNodeClickHouse  = "node-clickhouse"
	sinkNodeClickHouse2 = "node-clickhouse-2"
)

// allSinks are the -targets names, in the order the usage lists them.
var allSinks = []string{sinkNode, sinkClickHouse, sinkNodeClickHouse, sinkNodeClickHouse2}

// aggregatorsOf is how many aggregator nodes a ClickHouse-backed sink
// runs; 0 for the others.
func aggregatorsOf(sink string) int {
	switch sink {
	case sinkNodeClickHouse:
		return 1
	case sinkNodeClickHouse2:
		return 2
	}
	return 0
}

// config is everything a run needs, validated.
type config struct {
	Waymark          string
	ClickHouseBinary string
	NodeArgs         []string
	Sinks            []string
	Events           int
	Days             int
	Sites            int
	Links            int
	Visitors         int
	Pages            int
	ClickShare       float64
	SegmentEvents    int
	SegmentsPerBatch int
	CHBatch          int
	Pin              bool
	ServerCPU        string
	LoadCPU          string
	Out              string
	Verbose          bool
	StartTimeout     time.Duration
	CountTimeout     time.Duration
	Seed             uint64
	LogOut           io.Writer
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	var nodeArgs, sinks string
	fs := flag.NewFlagSet("aggbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Waymark, "waymark", "", "waymark binary (default: bin/waymark at the repo root)")
	fs.StringVar(&cfg.ClickHouseBinary, "clickhouse", "", "clickhouse-server binary (default: on PATH; Debian package clickhouse-server)")
	fs.StringVar(&nodeArgs, "node-args", "", "extra space-separated arguments for `waymark node --dev`")
	fs.StringVar(&sinks, "targets", sinkNode+","+sinkClickHouse, "where the events go, in order: node (the embedded aggregator), clickhouse (raw INSERTs), node-clickhouse and node-clickhouse-2 (one or two aggregators with --analytics-store clickhouse)")
	fs.IntVar(&cfg.Events, "events", 2_000_000, "events to generate (the same for every target)")
	fs.IntVar(&cfg.Days, "days", 30, "days the events span, ending a minute before the run starts")
	fs.IntVar(&cfg.Sites, "sites", 20, "sites registered in the node (site events pick one by Zipf popularity)")
	fs.IntVar(&cfg.Links, "links", 2000, "links created in the node (clicks pick one by Zipf popularity)")
	fs.IntVar(&cfg.Visitors, "visitors", 100_000, "visitor population (plus 200 crawlers)")
	fs.IntVar(&cfg.Pages, "pages", 500, "distinct pages per site")
	fs.Float64Var(&cfg.ClickShare, "click-share", 0.4, "share of clicks among the events")
	fs.IntVar(&cfg.SegmentEvents, "segment-events", 5000, "events per segment")
	fs.IntVar(&cfg.SegmentsPerBatch, "segments-per-batch", 8, "segments per POST to the aggregator")
	fs.IntVar(&cfg.CHBatch, "ch-batch", 100_000, "rows per INSERT into ClickHouse")
	fs.BoolVar(&cfg.Pin, "pin", true, "pin the servers to -server-cpu and this generator to -load-cpu (taskset)")
	fs.StringVar(&cfg.ServerCPU, "server-cpu", "0", "CPUs of the nodes and of ClickHouse, a taskset list (with -pin); a ClickHouse-backed sink's server and aggregators share them")
	fs.StringVar(&cfg.LoadCPU, "load-cpu", "1", "CPU of this generator (with -pin)")
	fs.StringVar(&cfg.Out, "out", "", "also write the results as JSON to this file")
	fs.BoolVar(&cfg.Verbose, "v", false, "copy the servers' logs to stderr")
	fs.DurationVar(&cfg.StartTimeout, "start-timeout", 60*time.Second, "how long each server may take to become ready")
	fs.DurationVar(&cfg.CountTimeout, "count-timeout", time.Minute, "how long, after the last acknowledgement, ClickHouse may take to show every event an aggregator stored")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the generated events")
	err := harness.ParseFlags(fs, args, func() error {
		cfg.NodeArgs = strings.Fields(nodeArgs)
		cfg.Sinks = strings.Split(sinks, ",")
		cfg.LogOut = stderr
		if !cfg.Pin {
			cfg.ServerCPU, cfg.LoadCPU = "", ""
		}
		return cfg.validate()
	})
	return cfg, err
}

func (c *config) validate() error {
	for _, s := range c.Sinks {
		if !slices.Contains(allSinks, s) {
			return fmt.Errorf("-targets: unknown target %q (want some of %s)", s, strings.Join(allSinks, ", "))
		}
	}
	switch {
	case len(slices.Compact(slices.Sorted(slices.Values(c.Sinks)))) != len(c.Sinks):
		return fmt.Errorf("-targets names a target twice: %q", c.Sinks)
	case c.Events <= 0 || c.Days <= 0 || c.Visitors <= 0 || c.Pages <= 0:
		return fmt.Errorf("-events, -days, -visitors and -pages must be positive")
	case c.Sites < 0 || c.Links < 0 || c.Sites+c.Links == 0:
		return fmt.Errorf("-sites and -links must not be negative, and not both zero")
	case c.ClickShare < 0 || c.ClickShare > 1:
		return fmt.Errorf("-click-share must be 0 to 1, got %v", c.ClickShare)
	case c.SegmentEvents <= 0 || c.SegmentsPerBatch <= 0 || c.CHBatch <= 0:
		return fmt.Errorf("-segment-events, -segments-per-batch and -ch-batch must be positive")
	case c.Pin && (c.ServerCPU == "" || c.LoadCPU == "" || c.ServerCPU == c.LoadCPU):
		return fmt.Errorf("-pin needs different -server-cpu and -load-cpu, got %q and %q", c.ServerCPU, c.LoadCPU)
	case c.StartTimeout <= 0 || c.CountTimeout <= 0:
		return fmt.Errorf("-start-timeout and -count-timeout must be positive")
	}
	return nil
}

func (c *config) has(sink string) bool { return slices.Contains(c.Sinks, sink) }
