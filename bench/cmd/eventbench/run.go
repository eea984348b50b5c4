package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

// ipRateArgs lifts the node's per-address limit: the load comes from one
// loopback address, and X-Forwarded-For spreads it over many visitors only
// as far as the limiter keys go.
var ipRateArgs = []string{"--ingest-ip-rate", "1000000"}

// target is a server under test: the node or the baseline.
type target struct {
	name   string
	addr   string
	pid    int
	exited <-chan struct{}
	why    func() string
}

func run(ctx context.Context, cfg config, out io.Writer) error {
	var echo io.Writer
	if cfg.Verbose {
		echo = cfg.LogOut
	}
	fmt.Fprintf(out, "eventbench: %d site(s), %d conns, %v warmup + %v measured per run, %d rounds; GOMAXPROCS %d, %d CPUs\n",
		cfg.Sites, cfg.Conns, cfg.Warmup, cfg.Duration, cfg.Rounds, runtime.GOMAXPROCS(0), runtime.NumCPU())

	node, dataDir, stopNode, err := startNode(ctx, cfg, echo, out)
	defer stopNode()
	if err != nil {
		return err
	}
	sites, err := registerSites(ctx, node.BaseURL, node.APIKey, cfg.Sites)
	if err != nil {
		return err
	}
	probed, err := probeSites(ctx, node.BaseURL, sites)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "registered %d site(s); each took an event (%d probe events)\n", len(sites), probed)

	bc := cfg.Baseline
	bc.Echo = echo
	baseline, baselineAddr, err := harness.StartBaselineChild(ctx, bc)
	if err != nil {
		return fmt.Errorf("cannot start the baseline: %w", err)
	}
	defer baseline.Stop()
	fmt.Fprintf(out, "baseline at %s (pid %d)\n", baselineAddr, baseline.Pid())

	base := target{name: "baseline", addr: baselineAddr, pid: baseline.Pid(), exited: baseline.Exited(), why: baseline.ExitNote}
	nt := target{name: "node", addr: node.HTTPAddr, pid: node.Pid(), exited: node.Exited(), why: node.ExitNote}
	domains := make([]string, len(sites))
	for i, s := range sites {
		domains[i] = s.Domain
	}
	rep := newReport(cfg)
	acc := newAcceptedTally(sites, probed)
	for r := range cfg.Rounds {
		round, err := runRound(ctx, cfg, out, r, base, nt, domains, acc)
		if err != nil {
			return err
		}
		rep.Rounds = append(rep.Rounds, round)
	}
	rep.summarize()
	rep.print(out)

	check := &StoredCheck{ExactlyOnce: true}
	if cfg.Check {
		fmt.Fprintf(out, "\nwaiting for shipping to settle (up to %v)\n", cfg.SettleTimeout)
		var err error
		if check, err = checkStored(ctx, cfg, node, dataDir, acc); err != nil {
			return err
		}
		rep.Stored = check
		check.print(out)
	} else {
		fmt.Fprintln(out, "\nexactly once: not checked (-check=false)")
	}
	if cfg.Out != "" {
		if err := harness.WriteJSON(cfg.Out, rep); err != nil {
			return err
		}
		fmt.Fprintf(out, "results written to %s\n", cfg.Out)
	}
	var errs []error
	if n := rep.Summary.Errors; n > 0 {
		errs = append(errs, fmt.Errorf("%d requests failed; the figures are not valid", n))
	}
	if !check.ExactlyOnce {
		errs = append(errs, fmt.Errorf("the raw store holds %d events; want exactly %d", check.Stored, check.Accepted))
	}
	return errors.Join(errs...)
}

// runRound measures the baseline and the node once each, in an order
// that alternates from round to round (see harness.RunPair).
func runRound(ctx context.Context, cfg config, out io.Writer, r int, base, node target, domains []string, acc *acceptedTally) (Round, error) {
	round := Round{Number: r + 1}
	slots := [2]*Measurement{&round.Baseline, &round.Node}
	targets := [2]target{base, node}
	err := harness.RunPair(r, func(side int) error {
		t := targets[side]
		// Each run starts with both servers idle, so it does not carry the
		// last run's work (a node still folding its events).
		waited, idle, err := harness.WaitIdle(ctx, harness.IdleConfig{Groups: []int{base.pid, node.pid}, Timeout: cfg.IdleTimeout})
		if err != nil {
			return err
		}
		if !idle {
			fmt.Fprintf(out, "  round %d %s: servers not idle after %v; measuring anyway\n", r+1, t.name, waited.Round(time.Second))
		}
		res, err := harness.RunEventLoad(ctx, harness.EventLoadConfig{
			Addr: t.addr, Domains: domains, Pages: cfg.Pages, Visitors: cfg.Visitors,
			Conns: cfg.Conns, Warmup: cfg.Warmup, Duration: cfg.Duration, Seed: cfg.Seed + uint64(r),
		})
		if t.name == "node" && res != nil {
			acc.add(res) // even after an error: what was accepted must be stored
		}
		if err != nil {
			return err
		}
		if harness.IsClosed(t.exited) {
			return fmt.Errorf("%s died during round %d: %s", t.name, r+1, t.why())
		}
		*slots[side] = newMeasurement(t.name, res)
		printRun(out, round.Number, *slots[side])
		return nil
	})
	round.Ratio = harness.Ratio(round.Node.RPS, round.Baseline.RPS)
	return round, err
}

// startNode starts a dev node in a fresh temp dir. The returned stop
// function is never nil; it stops the node and removes the dir.
func startNode(ctx context.Context, cfg config, echo, out io.Writer) (*harness.Node, string, func(), error) {
	bin, err := harness.ResolveWaymark(cfg.Waymark)
	if err != nil {
		return nil, "", func() {}, err
	}
	dir, err := os.MkdirTemp("", "eventbench-")
	if err != nil {
		return nil, "", func() {}, fmt.Errorf("cannot create a data dir: %w", err)
	}
	removeDir := func() { os.RemoveAll(dir) }
	args := append(append([]string(nil), ipRateArgs...), cfg.NodeArgs...)
	fmt.Fprintf(out, "starting %s node --dev --data-dir %s %v\n", bin, dir, args)
	started := time.Now()
	n, err := harness.StartDevNode(ctx, harness.NodeConfig{
		Binary: bin, DataDir: dir, ExtraArgs: args, Echo: echo, StartTimeout: cfg.StartTimeout,
	})
	if err != nil {
		removeDir()
		return nil, "", func() {}, fmt.Errorf("cannot start the node: %w", err)
	}
	fmt.Fprintf(out, "node ready at %s (pid %d) in %v\n", n.HTTPAddr, n.Pid(), time.Since(started).Round(time.Millisecond))
	stop := func() {
		if err := n.Stop(); err != nil {
			fmt.Fprintln(out, "eventbench:", err)
		}
		removeDir()
	}
	return n, dir, stop, nil
}
