// Package main is the redirectmatrix command. It measures, side by side in
// one run, the redirect throughput, latency and server CPU per request of
// five servers driven by the same closed-loop load generator on loopback:
// the floor (a bare fasthttp server answering a constant 302), nginx (one
// worker, a `map` of the same codes), `waymark node --dev` with click
// capture off and on, and a `--role voter,edge` node with capture on that
// ships to a separate aggregator process. The server under test is pinned
// to one CPU and the load generator to another (the edge's aggregator
// shares the load generator's CPU at nice 19: it stands for another
// machine and catches up between rounds); every figure is reported
// with its ratio to the floor measured in the same round.
//
// Usage:
//
//	redirectmatrix [-waymark bin/waymark] [-links 100000] [-duration 10s]
//	               [-warmup 2s] [-conns 64] [-rounds 3] [-visitors 20000]
//	               [-targets floor,nginx,dev-capture-off,dev,dev-fold-now,edge] [-out FILE]
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

// serveBaselineFlag re-executes this binary as the floor server. It is
// checked before flag parsing so it stays out of the usage text.
const serveBaselineFlag = "-serve-baseline"

// The targets, in the table order.
const (
	targetFloor      = "floor"
	targetNginx      = "nginx"
	targetDevNoCap   = "dev-capture-off"
	targetDev        = "dev"
	targetDevFoldNow = "dev-fold-now" // capture on, aggregation never deferred
	targetEdge       = "edge"
	allTargetsInList = targetFloor + "," + targetNginx + "," + targetDevNoCap + "," + targetDev + "," + targetDevFoldNow + "," + targetEdge
)

var knownTargets = strings.Split(allTargetsInList, ",")

func main() {
	harness.ServeChildIfAsked("redirectmatrix", serveBaselineFlag, harness.BaselineChildMain)
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	harness.ExitOnFlagError(err)
	// The load generator is this process: pin it before anything runs.
	harness.PinSelfOrExit("redirectmatrix", cfg.Pin, cfg.LoadCPU)
	cfg.Baseline = harness.SelfChild("redirectmatrix", targetFloor, serveBaselineFlag)
	harness.RunMain("redirectmatrix", nil, func(ctx context.Context) error {
		return run(ctx, cfg, os.Stdout)
	})
}

// config is everything a run needs, validated.
type config struct {
	Waymark     string // node binary; resolved from the repo root when empty
	NginxBinary string
	WrkBinary   string
	LoadGen     string // "wrk" or "go"
	NodeArgs    []string
	Targets     []string
	Links       int
	LoadWorkers int
	Visitors    int
	Query       string // appended to every measured request (-query)
	Domain      string // the nodes' links are on this custom domain, and every request names it in Host (-domain)
	harness.RoundFlags
	Pin           bool
	ServerCPU     string // where every server under test runs
	LoadCPU       string // where this process (the load generator) runs
	AggregatorCPU string // where the edge's separate aggregator runs; empty: unpinned
	// AggregatorNice is the niceness of the edge's aggregator: it stands
	// for another machine, so on the load generator's CPU it must not take
	// the time wrk needs (it catches up between rounds).
	AggregatorNice int
	IdleTimeout    time.Duration
	IdleShare      float64
	IdleSample     time.Duration // zero: 1 s (tests shorten it)
	Prime          bool
	Out            string
	Verbose        bool
	StartTimeout   time.Duration
	Seed           uint64

	Baseline harness.ChildConfig // how to start the floor child
	LogOut   io.Writer           // child output when Verbose; stderr in main
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	var nodeArgs, targets string
	fs := flag.NewFlagSet("redirectmatrix", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Waymark, "waymark", "", "waymark binary (default: bin/waymark at the repo root)")
	fs.StringVar(&cfg.NginxBinary, "nginx", "", "nginx binary (default: nginx on PATH; Debian package nginx-light)")
	fs.StringVar(&cfg.WrkBinary, "wrk", "", "wrk binary (default: wrk on PATH; Debian package wrk)")
	fs.StringVar(&cfg.LoadGen, "loadgen", "wrk", "load generator: wrk (one thread, Lua-driven requests) or go (the harness's fasthttp client)")
	fs.StringVar(&nodeArgs, "node-args", "", "extra space-separated arguments for every `waymark node`")
	fs.StringVar(&targets, "targets", allTargetsInList, "comma-separated servers to measure, of "+allTargetsInList)
	fs.IntVar(&cfg.Links, "links", 100_000, "links created in every node (and routes in nginx's map); requests pick among them at random")
	fs.IntVar(&cfg.LoadWorkers, "load-workers", 32, "concurrent creates while loading links")
	fs.IntVar(&cfg.Visitors, "visitors", 20_000, "distinct visitors (User-Agent and X-Forwarded-For) the requests come from; 0 sends neither header")
	cfg.RoundFlags.Register(fs)
	fs.StringVar(&cfg.Domain, "domain", "", "make the nodes' links on this custom domain (registered and approved for the dev owner) and send it as every request's Host, to every server alike")
	fs.StringVar(&cfg.Query, "query", "", "a query string (without ?) appended to every measured request, e.g. utm_source=news&utm_medium=email: links forward it to their destination")
	fs.BoolVar(&cfg.Pin, "pin", true, "pin servers to -server-cpu, this load generator to -load-cpu and the edge's aggregator to -aggregator-cpu (taskset)")
	fs.StringVar(&cfg.ServerCPU, "server-cpu", "0", "CPU of the server under test (with -pin)")
	fs.StringVar(&cfg.LoadCPU, "load-cpu", "1", "CPU of the load generator (with -pin)")
	fs.StringVar(&cfg.AggregatorCPU, "aggregator-cpu", "1", "CPU of the edge's separate aggregator (with -pin); empty leaves it unpinned")
	fs.IntVar(&cfg.AggregatorNice, "aggregator-nice", 19, "niceness of the edge's separate aggregator (0 to 19), so that it takes only CPU time the load generator leaves")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", 3*time.Minute, "how long to wait before each run for every server to be idle (a node still aggregating its last run's clicks)")
	fs.Float64Var(&cfg.IdleShare, "idle-share", 0.05, "idle means all servers together used less than this share of one CPU over 1 s")
	fs.BoolVar(&cfg.Prime, "prime", true, "request every link once on every server before the first round")
	fs.StringVar(&cfg.Out, "out", "", "also write the results as JSON to this file")
	fs.BoolVar(&cfg.Verbose, "v", false, "copy the children's logs to stderr")
	fs.DurationVar(&cfg.StartTimeout, "start-timeout", 60*time.Second, "how long each server may take to become ready")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed for the random choice of codes and visitors")
	err := harness.ParseFlags(fs, args, func() error {
		cfg.NodeArgs = strings.Fields(nodeArgs)
		cfg.Targets = strings.Split(targets, ",")
		cfg.LogOut = stderr
		if !cfg.Pin {
			cfg.ServerCPU, cfg.LoadCPU, cfg.AggregatorCPU = "", "", ""
		}
		return cfg.validate()
	})
	return cfg, err
}

func (c *config) validate() error {
	for _, t := range c.Targets {
		if !slices.Contains(knownTargets, t) {
			return fmt.Errorf("-targets: unknown target %q (want some of %s)", t, allTargetsInList)
		}
	}
	switch {
	case len(c.Targets) == 0:
		return fmt.Errorf("-targets is empty")
	case c.AggregatorNice < 0 || c.AggregatorNice > 19:
		return fmt.Errorf("-aggregator-nice must be 0 to 19, got %d", c.AggregatorNice)
	case len(slices.Compact(slices.Sorted(slices.Values(c.Targets)))) != len(c.Targets):
		return fmt.Errorf("-targets names a target twice: %q", c.Targets)
	case c.Links <= 0 || c.LoadWorkers <= 0 || c.Conns <= 0:
		return fmt.Errorf("-links, -load-workers and -conns must be positive, got %d, %d and %d", c.Links, c.LoadWorkers, c.Conns)
	case c.LoadGen != "wrk" && c.LoadGen != "go":
		return fmt.Errorf("-loadgen must be wrk or go, got %q", c.LoadGen)
	case c.Visitors < 0 || c.Visitors > harness.MaxVisitors:
		return fmt.Errorf("-visitors must be 0 to %d, got %d", harness.MaxVisitors, c.Visitors)
	case c.Pin && (c.ServerCPU == "" || c.LoadCPU == "" || c.ServerCPU == c.LoadCPU):
		return fmt.Errorf("-pin needs different -server-cpu and -load-cpu, got %q and %q", c.ServerCPU, c.LoadCPU)
	case c.IdleTimeout <= 0 || c.IdleShare <= 0 || c.StartTimeout <= 0:
		return fmt.Errorf("-idle-timeout, -idle-share and -start-timeout must be positive")
	}
	return c.RoundFlags.Validate()
}

func (c *config) has(target string) bool { return slices.Contains(c.Targets, target) }
