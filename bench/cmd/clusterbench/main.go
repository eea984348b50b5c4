// Package main is the clusterbench command. It measures a real multi-process Waymark cluster on
// loopback: three voters (regions us, eu, ap) and two edges, every port
// chosen by the kernel. It reports create throughput through the leader and
// through an edge (forwarded), replication lag from a create's
// acknowledgement to its application on every edge, takedown propagation
// to every node, and how long a new edge takes to catch up from a snapshot
// of a large link table. Every node is stopped on return, on error and on
// Ctrl-C.
//
// Usage:
//
//	clusterbench [-waymark bin/waymark] [-links 1000000] [-creates-duration 10s]
//	             [-takedowns 50] [-lag-samples 500] [-skip-catchup] [-out FILE]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

// errMissedTarget marks a finished run in which a figure missed its target
// under -check.
var errMissedTarget = errors.New("a figure missed its target")

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	harness.ExitOnFlagError(err)
	harness.RunMain("clusterbench", errMissedTarget, func(ctx context.Context) error {
		return run(ctx, cfg, os.Stdout)
	})
}

// config is everything a run needs, validated.
type config struct {
	Waymark         string
	NodeArgs        []string
	Owners          int
	Conns           int
	CreatesWarmup   time.Duration
	CreatesDuration time.Duration
	LagSamples      int
	LagLoadConns    int
	Takedowns       int
	Poll            time.Duration
	Links           int
	LoadMax         time.Duration
	SnapshotWait    time.Duration
	CatchupTimeout  time.Duration
	SkipCatchup     bool
	StartTimeout    time.Duration
	Out             string
	Check           bool
	Verbose         bool

	LogOut io.Writer // node logs when Verbose; stderr in main
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	var nodeArgs string
	fs := flag.NewFlagSet("clusterbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Waymark, "waymark", "", "waymark binary (default: bin/waymark at the repo root)")
	fs.StringVar(&nodeArgs, "node-args", "", "extra space-separated flags for every `waymark node`")
	fs.IntVar(&cfg.Owners, "owners", 16, "owners (API keys) to spread creates over; workers use them round-robin")
	fs.IntVar(&cfg.Conns, "conns", 64, "concurrent creates in the throughput runs and the bulk load")
	fs.DurationVar(&cfg.CreatesWarmup, "creates-warmup", 2*time.Second, "unmeasured creates before each throughput window")
	fs.DurationVar(&cfg.CreatesDuration, "creates-duration", 10*time.Second, "measured window of each throughput run (leader, then edge)")
	fs.IntVar(&cfg.LagSamples, "lag-samples", 500, "creates whose replication lag to every edge is measured, idle and again under load")
	fs.IntVar(&cfg.LagLoadConns, "lag-load-conns", 16, "background creates during the second lag pass; 0 skips that pass")
	fs.IntVar(&cfg.Takedowns, "takedowns", 50, "links taken down through an edge while every node is polled for 410")
	fs.DurationVar(&cfg.Poll, "poll", 500*time.Microsecond, "pause between two polls of one node (lag and takedown); sets their resolution")
	fs.IntVar(&cfg.Links, "links", 1_000_000, "links in the store before the new edge starts (counting the earlier phases' creates)")
	fs.DurationVar(&cfg.LoadMax, "load-max", 4*time.Minute, "cap on the bulk load; the catch-up then runs with what was loaded")
	fs.DurationVar(&cfg.SnapshotWait, "snapshot-wait", 12*time.Minute, "how long to wait for the leader's first raft snapshot after the load (raft checks every 5 to 10 min)")
	fs.DurationVar(&cfg.CatchupTimeout, "catchup-timeout", 10*time.Minute, "how long the new edge may take to catch up")
	fs.BoolVar(&cfg.SkipCatchup, "skip-catchup", false, "skip the bulk load and the new-edge catch-up")
	fs.DurationVar(&cfg.StartTimeout, "start-timeout", 90*time.Second, "for each node to bind, and for the cluster to form")
	fs.StringVar(&cfg.Out, "out", "", "also write the results as JSON to this file")
	fs.BoolVar(&cfg.Check, "check", false, "exit with status 3 when a figure misses its target (5,000 creates/s, takedown p99 < 1 s)")
	fs.BoolVar(&cfg.Verbose, "v", false, "copy the nodes' logs to stderr")
	err := harness.ParseFlags(fs, args, func() error {
		cfg.NodeArgs = strings.Fields(nodeArgs)
		cfg.LogOut = stderr
		return cfg.validate()
	})
	return cfg, err
}

func (c *config) validate() error {
	switch {
	case c.Owners <= 0 || c.Conns <= 0:
		return fmt.Errorf("-owners and -conns must be positive, got %d and %d", c.Owners, c.Conns)
	case c.CreatesDuration <= 0 || c.CreatesWarmup < 0:
		return fmt.Errorf("-creates-duration must be positive and -creates-warmup not negative, got %v and %v", c.CreatesDuration, c.CreatesWarmup)
	case c.LagSamples < 0 || c.LagLoadConns < 0 || c.Takedowns < 0:
		return fmt.Errorf("-lag-samples, -lag-load-conns and -takedowns must not be negative, got %d, %d and %d", c.LagSamples, c.LagLoadConns, c.Takedowns)
	case c.Poll < 0:
		return fmt.Errorf("-poll must not be negative, got %v", c.Poll)
	case !c.SkipCatchup && (c.Links <= 0 || c.LoadMax <= 0 || c.CatchupTimeout <= 0 || c.SnapshotWait < 0):
		return fmt.Errorf("-links, -load-max and -catchup-timeout must be positive and -snapshot-wait not negative, got %d, %v, %v and %v", c.Links, c.LoadMax, c.CatchupTimeout, c.SnapshotWait)
	}
	return nil
}
