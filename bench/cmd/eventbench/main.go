// Package main is the eventbench command. It measures event ingest: POST /api/event through a real
// `waymark node --dev` on loopback, against a bare fasthttp server that
// answers every request with 202, both driven by the same closed-loop load
// generator in the same run. It registers the benchmark's site(s), runs
// baseline and node back to back for several rounds, reports events/s, p50
// and p99 for both and the median node/baseline ratio, and then checks that
// the node's raw event store holds exactly the events it accepted.
//
// Usage:
//
//	eventbench [-waymark bin/waymark] [-duration 10s] [-warmup 2s]
//	           [-conns 64] [-rounds 3] [-sites 1] [-out results.json]
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

// serveBaselineFlag re-executes this binary as the event baseline server. It
// is checked before flag parsing so it stays out of the usage text.
const serveBaselineFlag = "-serve-event-baseline"

func main() {
	harness.ServeChildIfAsked("eventbench", serveBaselineFlag, harness.EventBaselineChildMain)
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	harness.ExitOnFlagError(err)
	cfg.Baseline = harness.SelfChild("eventbench", "baseline", serveBaselineFlag)
	harness.RunMain("eventbench", nil, func(ctx context.Context) error {
		return run(ctx, cfg, os.Stdout)
	})
}

// config is everything a run needs, validated.
type config struct {
	Waymark  string // node binary; resolved from the repo root when empty
	NodeArgs []string
	Sites    int
	Pages    int
	Visitors int
	harness.RoundFlags
	Out           string
	Verbose       bool
	StartTimeout  time.Duration
	SettleTimeout time.Duration
	IdleTimeout   time.Duration
	// Check runs the exactly-once check of the raw store; it needs a node
	// with the aggregator role (not `--role voter,edge`).
	Check bool
	Seed  uint64

	Baseline harness.ChildConfig // how to start the baseline child
	LogOut   io.Writer           // child output when Verbose; stderr in main
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	var nodeArgs string
	fs := flag.NewFlagSet("eventbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Waymark, "waymark", "", "waymark binary to start as a dev node (default: bin/waymark at the repo root)")
	fs.StringVar(&nodeArgs, "node-args", "", "extra space-separated arguments for `waymark node --dev` (after --ingest-ip-rate 1000000)")
	fs.IntVar(&cfg.Sites, "sites", 1, "sites to register (bench.example, then bench-2.example, ...); events are spread over them")
	fs.IntVar(&cfg.Pages, "pages", 1000, "distinct page paths per site")
	fs.IntVar(&cfg.Visitors, "visitors", 10000, "distinct X-Forwarded-For addresses (at most 131072)")
	cfg.RoundFlags.Register(fs)
	fs.StringVar(&cfg.Out, "out", "", "also write the results as JSON to this file")
	fs.BoolVar(&cfg.Verbose, "v", false, "copy the children's logs to stderr")
	fs.DurationVar(&cfg.StartTimeout, "start-timeout", 60*time.Second, "how long the node may take to become ready")
	fs.DurationVar(&cfg.SettleTimeout, "settle-timeout", 10*time.Minute, "how long shipping may take to store every accepted event")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", 3*time.Minute, "how long to wait before each run for both servers to be idle (a node still folding its last run's events)")
	fs.BoolVar(&cfg.Check, "check", true, "check that the raw store holds exactly the accepted events (needs the aggregator role: -check=false with -node-args \"--role voter,edge\")")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed for the choice of site, page and visitor")
	err := harness.ParseFlags(fs, args, func() error {
		cfg.NodeArgs = strings.Fields(nodeArgs)
		cfg.LogOut = stderr
		return cfg.validate()
	})
	return cfg, err
}

func (c *config) validate() error {
	switch {
	case c.Sites <= 0 || c.Pages <= 0 || c.Visitors <= 0:
		return fmt.Errorf("-sites, -pages and -visitors must be positive, got %d, %d and %d", c.Sites, c.Pages, c.Visitors)
	case c.Visitors > 1<<17:
		return fmt.Errorf("-visitors must be at most %d, got %d", 1<<17, c.Visitors)
	case c.Conns <= 0:
		return fmt.Errorf("-conns must be positive, got %d", c.Conns)
	case c.SettleTimeout <= 0 || c.StartTimeout <= 0:
		return errors.New("-settle-timeout and -start-timeout must be positive")
	}
	return c.RoundFlags.Validate()
}
