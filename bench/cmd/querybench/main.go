// Package main is the querybench command. It loads the same two hot
// entities into a Waymark node and into a ClickHouse server it starts
// itself: a link with 1,000,000 clicks a day and a site with 1,000,000
// pageviews a day (times -scale), over 30 whole UTC days. Then it times,
// repeatedly and alternately, a 30-day daily series and a breakdown of
// each (link: by country; site: by page) through the node's stats API and
// as the equivalent ClickHouse SQL over HTTP (count() and uniq(visitor)),
// checks every answer against the generated truth, and reports p50 and
// p99 for both and their ratio.
//
// Usage:
//
//	querybench [-waymark bin/waymark] [-scale 1] [-days 30] [-reps 100] [-out FILE]
//	           [-backends pebble,clickhouse] [-with-clickhouse=false]
//
// -backends pebble,clickhouse puts two nodes under test in one run: the
// embedded store and a node with --analytics-store clickhouse in front of
// the same ClickHouse server (database waymark), each loaded with its own
// copy of the stream (its own link and site) and checked against it.
// -scale 0.5 is 30,000,000 events in all (issue 14's figure).
//
// For iterating on the node's query path: -scale 0.1 loads a tenth of the
// events, -with-clickhouse=false leaves ClickHouse out, -profile FILE writes the
// node's CPU profile over the timed repetitions, -node-env GODEBUG=gctrace=1
// (with -v) shows the node's garbage collections.
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
	harness.PinSelfOrExit("querybench", cfg.Pin, cfg.LoadCPU)
	harness.RunMain("querybench", nil, func(ctx context.Context) error {
		return run(ctx, cfg, os.Stdout)
	})
}

// config is everything a run needs, validated.
type config struct {
	Waymark          string
	ClickHouseBinary string
	NodeArgs         []string
	Scale            float64
	Days             int
	Reps             int
	Pages            int
	SegmentEvents    int
	SegmentsPerBatch int
	CHBatch          int
	Pin              bool
	ServerCPU        string
	LoadCPU          string
	IdleTimeout      time.Duration
	Out              string
	Verbose          bool
	StartTimeout     time.Duration
	Seed             uint64
	LogOut           io.Writer
	WithClickHouse   bool
	Backends         []string
	LoadTimeout      time.Duration
	CountTimeout     time.Duration
	QueryTimeout     time.Duration
	RepsBudget       time.Duration
	Profile          string
	ProfileSeconds   int
	NodeEnv          []string
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	var nodeArgs, nodeEnv, backends string
	fs := flag.NewFlagSet("querybench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Waymark, "waymark", "", "waymark binary (default: bin/waymark at the repo root)")
	fs.StringVar(&cfg.ClickHouseBinary, "clickhouse", "", "clickhouse-server binary (default: on PATH; Debian package clickhouse-server)")
	fs.StringVar(&nodeArgs, "node-args", "", "extra space-separated arguments for `waymark node --dev`")
	fs.Float64Var(&cfg.Scale, "scale", 1, "daily volume of each hot entity, in millions (0.01: 10,000 a day, for a quick run)")
	fs.IntVar(&cfg.Days, "days", 30, "whole UTC days of data, ending at today's midnight; the queries cover all of them")
	fs.IntVar(&cfg.Reps, "reps", 100, "timed repetitions of each query on each server (at least 50)")
	fs.IntVar(&cfg.Pages, "pages", 1000, "distinct pages of the hot site")
	fs.IntVar(&cfg.SegmentEvents, "segment-events", 5000, "events per segment shipped to the node")
	fs.IntVar(&cfg.SegmentsPerBatch, "segments-per-batch", 8, "segments per POST to the node")
	fs.IntVar(&cfg.CHBatch, "ch-batch", 200_000, "rows per INSERT into ClickHouse")
	fs.BoolVar(&cfg.Pin, "pin", true, "pin both servers to -server-cpu and this client to -load-cpu (taskset)")
	fs.StringVar(&cfg.ServerCPU, "server-cpu", "0", "CPUs of the nodes and of ClickHouse, a taskset list (with -pin); they share them")
	fs.StringVar(&cfg.LoadCPU, "load-cpu", "1", "CPU of this client and generator (with -pin)")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", 5*time.Minute, "how long to let both servers finish background work (compactions, merges) before the queries")
	fs.StringVar(&cfg.Out, "out", "", "also write the results as JSON to this file")
	fs.BoolVar(&cfg.Verbose, "v", false, "copy the servers' logs to stderr")
	fs.DurationVar(&cfg.StartTimeout, "start-timeout", 60*time.Second, "how long each server may take to become ready")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the generated events")
	fs.BoolVar(&cfg.WithClickHouse, "with-clickhouse", true, "also load and time ClickHouse's own SQL over a raw events table (false: the nodes alone)")
	fs.StringVar(&backends, "backends", backendPebble, "analytics stores of the nodes under test, in order: pebble (embedded), clickhouse (--analytics-store clickhouse against the run's ClickHouse), or both")
	fs.DurationVar(&cfg.LoadTimeout, "load-timeout", 45*time.Minute, "bound on loading every server (the run fails past it; progress lines every 10 %)")
	fs.DurationVar(&cfg.CountTimeout, "count-timeout", 5*time.Minute, "how long, after the last acknowledgement, the ClickHouse-backed node's database may take to show every event (a count FINAL over 30M rows took over a minute while its materializer ran on a busy machine)")
	fs.DurationVar(&cfg.QueryTimeout, "query-timeout", 30*time.Second, "longest a server may take to answer one query; a server that takes longer is not asked that query again, and the report says so (below the ClickHouse-backed node's own 60 s limit)")
	fs.DurationVar(&cfg.RepsBudget, "reps-budget", 0, "stop the timed repetitions at the first one that ends past this (0: all -reps); the report gives how many ran, and a p99 of fewer than 50 is their largest")
	fs.StringVar(&cfg.Profile, "profile", "", "write the node's CPU profile over the timed repetitions to this file")
	fs.IntVar(&cfg.ProfileSeconds, "profile-seconds", 30, "length of the -profile capture; the node is kept asking until it ends")
	fs.StringVar(&nodeEnv, "node-env", "", "extra space-separated NAME=VALUE pairs for the node's environment (GODEBUG=gctrace=1 with -v)")
	err := harness.ParseFlags(fs, args, func() error {
		cfg.NodeArgs = strings.Fields(nodeArgs)
		cfg.NodeEnv = strings.Fields(nodeEnv)
		cfg.Backends = strings.Split(backends, ",")
		cfg.LogOut = stderr
		if !cfg.Pin {
			cfg.ServerCPU, cfg.LoadCPU = "", ""
		}
		return cfg.validate()
	})
	return cfg, err
}

// minReps is the fewest repetitions a p99 is quoted from.
const minReps = 50

func (c *config) validate() error {
	switch {
	case c.Scale <= 0 || c.Days <= 0 || c.Pages <= 0:
		return fmt.Errorf("-scale, -days and -pages must be positive")
	case c.Reps < minReps:
		return fmt.Errorf("-reps must be at least %d, got %d", minReps, c.Reps)
	case c.SegmentEvents <= 0 || c.SegmentsPerBatch <= 0 || c.CHBatch <= 0:
		return fmt.Errorf("-segment-events, -segments-per-batch and -ch-batch must be positive")
	case c.Pin && (c.ServerCPU == "" || c.LoadCPU == "" || c.ServerCPU == c.LoadCPU):
		return fmt.Errorf("-pin needs different -server-cpu and -load-cpu, got %q and %q", c.ServerCPU, c.LoadCPU)
	case c.Profile != "" && c.ProfileSeconds <= 0:
		return fmt.Errorf("-profile-seconds must be positive")
	case c.StartTimeout <= 0 || c.IdleTimeout <= 0 || c.LoadTimeout <= 0 || c.CountTimeout <= 0 || c.QueryTimeout <= 0:
		return fmt.Errorf("-start-timeout, -idle-timeout, -load-timeout, -count-timeout and -query-timeout must be positive")
	case c.RepsBudget < 0:
		return fmt.Errorf("-reps-budget must not be negative")
	case len(slices.Compact(slices.Sorted(slices.Values(c.Backends)))) != len(c.Backends):
		return fmt.Errorf("-backends names a store twice: %q", c.Backends)
	}
	for _, b := range c.Backends {
		if b != backendPebble && b != backendClickHouse {
			return fmt.Errorf("-backends: unknown store %q (want pebble and/or clickhouse)", b)
		}
	}
	return nil
}

// Analytics stores of the nodes under test (the node's --analytics-store).
const (
	backendPebble     = "pebble"
	backendClickHouse = "clickhouse"
)

// needsClickHouse reports whether the run starts a ClickHouse server:
// for its own SQL, or behind a node.
func (c *config) needsClickHouse() bool {
	return c.WithClickHouse || slices.Contains(c.Backends, backendClickHouse)
}
