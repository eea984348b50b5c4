// Package main is the redirectbench command. It measures the redirect hot path of a Waymark node
// against a bare fasthttp server that answers a constant 302, both driven by
// the same closed-loop load generator on loopback in the same run. It loads
// N links into a node (a `waymark node --dev` child it starts, or a running
// node given with -url), then alternates baseline and node runs for several
// rounds and reports requests/s, p50 and p99 for both and the median
// node/baseline throughput ratio.
//
// Usage:
//
//	redirectbench [-waymark bin/waymark] [-links 100000] [-duration 10s]
//	              [-warmup 2s] [-conns 64] [-rounds 3] [-out results.json]
//	redirectbench -url http://127.0.0.1:8080 -api-key-file DIR/dev-api-key
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

// serveBaselineFlag re-executes this binary as the baseline server. It is
// checked before flag parsing so it stays out of the usage text.
const serveBaselineFlag = "-serve-baseline"

// errBelowTarget marks a finished run whose ratio missed -target under -check.
var errBelowTarget = errors.New("node/baseline ratio is below the target")

func main() {
	harness.ServeChildIfAsked("redirectbench", serveBaselineFlag, harness.BaselineChildMain)
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	harness.ExitOnFlagError(err)
	cfg.Baseline = harness.SelfChild("redirectbench", "baseline", serveBaselineFlag)
	harness.RunMain("redirectbench", errBelowTarget, func(ctx context.Context) error {
		return run(ctx, cfg, os.Stdout)
	})
}

// config is everything a run needs, validated.
type config struct {
	Waymark     string // node binary; resolved from the repo root when empty
	NodeURL     string // a running node instead of a child
	APIKeyFile  string
	NodeArgs    []string
	Links       int
	LoadWorkers int
	Keys        int
	harness.RoundFlags
	Out          string
	Target       float64
	Check        bool
	Prime        bool
	AA           bool
	Verbose      bool
	StartTimeout time.Duration
	Seed         uint64

	NodeEnv  []string            // added to the node's environment (tests)
	Baseline harness.ChildConfig // how to start the baseline child
	LogOut   io.Writer           // child output when Verbose; stderr in main
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	var nodeArgs string
	fs := flag.NewFlagSet("redirectbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Waymark, "waymark", "", "waymark binary to start as a dev node (default: bin/waymark at the repo root)")
	fs.StringVar(&cfg.NodeURL, "url", "", "benchmark an already-running node at this loopback URL instead of starting one")
	fs.StringVar(&cfg.APIKeyFile, "api-key-file", "", "file with owner API keys, one per line, for -url (a dev node writes DATA_DIR/dev-api-key)")
	fs.IntVar(&cfg.Keys, "keys", 32, "API keys to spread the link load over; the node limits writes per key (a started node only)")
	fs.StringVar(&nodeArgs, "node-args", "", "extra space-separated arguments for `waymark node --dev`")
	fs.IntVar(&cfg.Links, "links", 100_000, "links to create before measuring; requests pick among them at random")
	fs.IntVar(&cfg.LoadWorkers, "load-workers", 32, "concurrent creates while loading links")
	cfg.RoundFlags.Register(fs)
	fs.StringVar(&cfg.Out, "out", "", "also write the results as JSON to this file")
	fs.Float64Var(&cfg.Target, "target", 0.9, "node/baseline throughput ratio the node should reach")
	fs.BoolVar(&cfg.Check, "check", false, "exit with status 3 when the median ratio is below -target")
	fs.BoolVar(&cfg.Prime, "prime", true, "request every link once before the first round, so rounds measure a warm cache")
	fs.BoolVar(&cfg.AA, "aa", false, "A/A run: measure a second baseline in the node's place, to see this machine's noise floor")
	fs.BoolVar(&cfg.Verbose, "v", false, "copy the children's logs to stderr")
	fs.DurationVar(&cfg.StartTimeout, "start-timeout", 60*time.Second, "how long the node may take to become ready")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed for the random choice of codes")
	err := harness.ParseFlags(fs, args, func() error {
		cfg.NodeArgs = strings.Fields(nodeArgs)
		cfg.LogOut = stderr
		return cfg.validate()
	})
	return cfg, err
}

func (c *config) validate() error {
	switch {
	case c.Links <= 0:
		return fmt.Errorf("-links must be positive, got %d", c.Links)
	case c.Conns <= 0 || c.LoadWorkers <= 0 || c.Keys <= 0:
		return fmt.Errorf("-conns, -load-workers and -keys must be positive, got %d, %d and %d", c.Conns, c.LoadWorkers, c.Keys)
	case c.NodeURL == "" && c.APIKeyFile != "":
		return errors.New("-api-key-file only goes with -url")
	case c.NodeURL != "" && c.APIKeyFile == "":
		return errors.New("-url needs -api-key-file")
	case c.NodeURL != "" && (c.Waymark != "" || len(c.NodeArgs) > 0):
		return errors.New("-url cannot be combined with -waymark or -node-args")
	case c.AA && (c.NodeURL != "" || c.Waymark != ""):
		return errors.New("-aa starts no node: drop -url and -waymark")
	}
	return c.RoundFlags.Validate()
}
