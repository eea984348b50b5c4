// Package main is the capturecheck command. It checks that click capture
// keeps up with everything a node can serve: it drives a `waymark node
// --dev` (capture on) at saturation with redirects from many distinct
// visitors (a User-Agent and an X-Forwarded-For each; loopback is a
// trusted proxy in --dev), reads the node's capture counters before and
// after (written, dropped by reason, shipped), reports the share of clicks
// dropped, and then times how long after the end of the load every
// written click is counted by the aggregator and shown in the links'
// stats.
//
// Usage:
//
//	capturecheck [-waymark bin/waymark] [-links 1000] [-visitors 20000]
//	             [-duration 10s] [-conns 64] [-out FILE] [-check]
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

// errMissed marks a finished run that missed a target under -check.
var errMissed = errors.New("capture missed its target")

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	harness.ExitOnFlagError(err)
	harness.PinSelfOrExit("capturecheck", cfg.Pin, cfg.LoadCPU)
	harness.RunMain("capturecheck", errMissed, func(ctx context.Context) error {
		return run(ctx, cfg, os.Stdout)
	})
}

// config is everything a run needs, validated.
type config struct {
	Waymark       string
	WrkBinary     string
	LoadGen       string
	NodeArgs      []string
	Links         int
	Visitors      int
	Duration      time.Duration
	Conns         int
	Pin           bool
	ServerCPU     string
	LoadCPU       string
	SettleTimeout time.Duration
	MaxDropShare  float64
	MaxSettle     time.Duration
	Check         bool
	Out           string
	Verbose       bool
	StartTimeout  time.Duration
	Seed          uint64
	LogOut        io.Writer
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	var nodeArgs string
	fs := flag.NewFlagSet("capturecheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Waymark, "waymark", "", "waymark binary (default: bin/waymark at the repo root)")
	fs.StringVar(&cfg.WrkBinary, "wrk", "", "wrk binary (default: wrk on PATH; Debian package wrk)")
	fs.StringVar(&cfg.LoadGen, "loadgen", "wrk", "load generator: wrk (one thread) or go (the harness's fasthttp client)")
	fs.StringVar(&nodeArgs, "node-args", "", "extra space-separated arguments for `waymark node --dev`")
	fs.IntVar(&cfg.Links, "links", 1000, "links the redirects pick from at random")
	fs.IntVar(&cfg.Visitors, "visitors", 20_000, "distinct visitors (User-Agent and X-Forwarded-For each) the redirects come from")
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long the load runs (whole seconds with wrk)")
	fs.IntVar(&cfg.Conns, "conns", 64, "concurrent keep-alive connections")
	fs.BoolVar(&cfg.Pin, "pin", true, "pin the node to -server-cpu and the load generator to -load-cpu (taskset)")
	fs.StringVar(&cfg.ServerCPU, "server-cpu", "0", "CPU of the node (with -pin)")
	fs.StringVar(&cfg.LoadCPU, "load-cpu", "1", "CPU of the load generator (with -pin)")
	fs.DurationVar(&cfg.SettleTimeout, "settle-timeout", 5*time.Minute, "how long to wait, after the load, for every written click to be counted")
	fs.Float64Var(&cfg.MaxDropShare, "max-drop", 0.001, "target: at most this share of clicks dropped")
	fs.DurationVar(&cfg.MaxSettle, "max-settle", 15*time.Second, "target: every written click counted within this long after the load")
	fs.BoolVar(&cfg.Check, "check", false, "exit with status 3 when a target is missed")
	fs.StringVar(&cfg.Out, "out", "", "also write the results as JSON to this file")
	fs.BoolVar(&cfg.Verbose, "v", false, "copy the children's logs to stderr")
	fs.DurationVar(&cfg.StartTimeout, "start-timeout", 60*time.Second, "how long the node may take to become ready")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed for the choice of links and visitors")
	err := harness.ParseFlags(fs, args, func() error {
		cfg.NodeArgs = strings.Fields(nodeArgs)
		cfg.LogOut = stderr
		if !cfg.Pin {
			cfg.ServerCPU, cfg.LoadCPU = "", ""
		}
		return cfg.validate()
	})
	return cfg, err
}

func (c *config) validate() error {
	switch {
	case c.Links <= 0 || c.Conns <= 0 || c.Duration <= 0:
		return fmt.Errorf("-links, -conns and -duration must be positive")
	case c.Visitors <= 0 || c.Visitors > harness.MaxVisitors:
		return fmt.Errorf("-visitors must be 1 to %d, got %d", harness.MaxVisitors, c.Visitors)
	case c.LoadGen != "wrk" && c.LoadGen != "go":
		return fmt.Errorf("-loadgen must be wrk or go, got %q", c.LoadGen)
	case c.Pin && (c.ServerCPU == "" || c.LoadCPU == "" || c.ServerCPU == c.LoadCPU):
		return fmt.Errorf("-pin needs different -server-cpu and -load-cpu, got %q and %q", c.ServerCPU, c.LoadCPU)
	case c.SettleTimeout <= 0 || c.StartTimeout <= 0 || c.MaxSettle <= 0 || c.MaxDropShare < 0:
		return fmt.Errorf("-settle-timeout, -start-timeout and -max-settle must be positive, -max-drop not negative")
	}
	return nil
}
