package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

// redirectSample is how many loaded links are fetched once, before any
// timing, to check they redirect where they should.
const redirectSample = 20

// target is a server under test: the node (started here or already
// running), the baseline, or in an A/A run a second baseline.
type target struct {
	name    string // label in the report
	addr    string // host:port
	baseURL string
	apiKeys []string
	exited  <-chan struct{} // closed if a child we started dies; nil otherwise
	why     func() string   // the dead child's exit status and last output
}

func run(ctx context.Context, cfg config, out io.Writer) error {
	var echo io.Writer
	if cfg.Verbose {
		echo = cfg.LogOut
	}
	fmt.Fprintf(out, "redirectbench: %d links, %d conns, %v warmup + %v measured per run, %d rounds; GOMAXPROCS %d, %d CPUs\n",
		cfg.Links, cfg.Conns, cfg.Warmup, cfg.Duration, cfg.Rounds, runtime.GOMAXPROCS(0), runtime.NumCPU())

	var (
		node     target
		paths    [][]byte
		loadTime time.Duration
	)
	if cfg.AA {
		// A/A: a second baseline stands in for the node, so the ratio shows
		// how far apart two identical servers measure on this machine.
		second, addr, err := startBaseline(ctx, cfg, echo, out, "baseline-b")
		if err != nil {
			return err
		}
		defer second.Stop()
		node = target{name: "baseline-b", addr: addr, exited: second.Exited(), why: second.ExitNote}
		paths = syntheticPaths(cfg.Links)
	} else {
		var stopNode func()
		var err error
		node, stopNode, err = startTarget(ctx, cfg, echo, out)
		defer stopNode()
		if err != nil {
			return err
		}
		if paths, loadTime, err = loadLinks(ctx, cfg, node, out); err != nil {
			return err
		}
	}
	baseline, baselineAddr, err := startBaseline(ctx, cfg, echo, out, "baseline")
	if err != nil {
		return err
	}
	defer baseline.Stop()
	base := target{name: "baseline", addr: baselineAddr, exited: baseline.Exited(), why: baseline.ExitNote}

	if cfg.Prime {
		for _, t := range []target{base, node} {
			if err := prime(ctx, cfg, out, t, paths); err != nil {
				return err
			}
		}
	}

	rep := newReport(cfg, len(paths), loadTime)
	for r := range cfg.Rounds {
		round, err := runRound(ctx, cfg, out, r, base, node, paths)
		if err != nil {
			return err
		}
		rep.Rounds = append(rep.Rounds, round)
	}
	rep.summarize()
	rep.print(out)
	if cfg.Out != "" {
		if err := harness.WriteJSON(cfg.Out, rep); err != nil {
			return err
		}
		fmt.Fprintf(out, "results written to %s\n", cfg.Out)
	}
	if n := rep.Summary.Errors; n > 0 {
		return fmt.Errorf("%d requests failed; the figures are not valid", n)
	}
	if cfg.Check && !rep.Summary.Pass {
		return fmt.Errorf("%w: %.3f < %.2f", errBelowTarget, rep.Summary.Ratio, cfg.Target)
	}
	return nil
}

// runRound measures the baseline and the node once each, in an order
// that alternates from round to round (see harness.RunPair).
func runRound(ctx context.Context, cfg config, out io.Writer, r int, base, node target, paths [][]byte) (Round, error) {
	round := Round{Number: r + 1}
	slots := [2]*Measurement{&round.Baseline, &round.Node}
	targets := [2]target{base, node}
	err := harness.RunPair(r, func(side int) error {
		t := targets[side]
		res, err := harness.RunLoad(ctx, harness.LoadConfig{
			Addr: t.addr, Paths: paths, Conns: cfg.Conns,
			Warmup: cfg.Warmup, Duration: cfg.Duration, Seed: cfg.Seed + uint64(r),
		})
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

// prime requests every path once, so the rounds measure a node whose cache
// has seen every link rather than one still filling it: with 100,000 links,
// a 2 s warmup touches only part of them.
func prime(ctx context.Context, cfg config, out io.Writer, t target, paths [][]byte) error {
	res, err := harness.RunLoad(ctx, harness.LoadConfig{
		Addr: t.addr, Paths: paths, Conns: cfg.Conns, Duration: 10 * time.Minute, EachOnce: true,
	})
	if err != nil {
		return fmt.Errorf("cannot prime %s: %w", t.name, err)
	}
	if res.Errors() > 0 {
		return fmt.Errorf("cannot prime %s: %d of %d requests failed (%s; first: %s)", t.name, res.Errors(), len(paths), res.StatusSummary(), res.FirstError)
	}
	fmt.Fprintf(out, "primed %s: each of %d paths once in %v (%.0f req/s)\n", t.name, len(paths), res.Elapsed.Round(time.Millisecond), res.RPS())
	return nil
}

func startBaseline(ctx context.Context, cfg config, echo, out io.Writer, name string) (*harness.Child, string, error) {
	bc := cfg.Baseline
	bc.Name = name
	bc.Echo = echo
	child, addr, err := harness.StartBaselineChild(ctx, bc)
	if err != nil {
		return nil, "", fmt.Errorf("cannot start %s: %w", name, err)
	}
	fmt.Fprintf(out, "%s at %s (pid %d)\n", name, addr, child.Pid())
	return child, addr, nil
}

// loadLinks creates the links, checks a sample redirects correctly, and
// returns the request paths for the load generator.
func loadLinks(ctx context.Context, cfg config, node target, out io.Writer) ([][]byte, time.Duration, error) {
	fmt.Fprintf(out, "loading %d links into %s with %d workers and %d API keys\n", cfg.Links, node.baseURL, cfg.LoadWorkers, len(node.apiKeys))
	start := time.Now()
	codes, err := harness.LoadLinks(ctx, harness.LinkLoadConfig{
		BaseURL: node.baseURL, APIKeys: node.apiKeys, Count: cfg.Links,
		Workers: cfg.LoadWorkers, Progress: out,
	})
	if err != nil {
		return nil, 0, err
	}
	took := time.Since(start)
	fmt.Fprintf(out, "loaded %d links in %v (%.0f creates/s)\n", len(codes), took.Round(time.Millisecond), float64(len(codes))/took.Seconds())
	if err := harness.CheckRedirects(ctx, node.baseURL, codes, harness.BenchURL, sampleIndexes(len(codes), redirectSample)); err != nil {
		return nil, 0, fmt.Errorf("cannot trust the node's redirects: %w", err)
	}
	paths := make([][]byte, len(codes))
	for i, c := range codes {
		paths[i] = []byte("/" + c)
	}
	return paths, took, nil
}

// syntheticPaths makes n distinct 7-character paths for an A/A run, shaped
// like real codes so both sides parse the same bytes.
func syntheticPaths(n int) [][]byte {
	paths := make([][]byte, n)
	for i := range paths {
		paths[i] = fmt.Appendf(nil, "/a%06d", i%1_000_000)
	}
	return paths
}

// startTarget starts a dev node in a fresh temp dir, or checks the running
// node given with -url. The returned stop function is never nil.
func startTarget(ctx context.Context, cfg config, echo, out io.Writer) (target, func(), error) {
	if cfg.NodeURL != "" {
		t, err := existingTarget(ctx, cfg)
		return t, func() {}, err
	}
	bin, err := harness.ResolveWaymark(cfg.Waymark)
	if err != nil {
		return target{}, func() {}, err
	}
	dir, err := os.MkdirTemp("", "redirectbench-")
	if err != nil {
		return target{}, func() {}, fmt.Errorf("cannot create a data dir: %w", err)
	}
	removeDir := func() { os.RemoveAll(dir) }
	fmt.Fprintf(out, "starting %s node --dev --data-dir %s\n", bin, dir)
	started := time.Now()
	n, err := harness.StartDevNode(ctx, harness.NodeConfig{
		Binary: bin, DataDir: dir, ExtraArgs: cfg.NodeArgs, Env: cfg.NodeEnv, Echo: echo, StartTimeout: cfg.StartTimeout,
	})
	if err != nil {
		removeDir()
		return target{}, func() {}, fmt.Errorf("cannot start the node: %w", err)
	}
	fmt.Fprintf(out, "node ready at %s (pid %d) in %v\n", n.HTTPAddr, n.Pid(), time.Since(started).Round(time.Millisecond))
	stop := func() {
		if err := n.Stop(); err != nil {
			fmt.Fprintln(out, "redirectbench:", err)
		}
		removeDir()
	}
	// The node limits writes per API key: spread the load over more owners.
	keys := []string{n.APIKey}
	if cfg.Keys > 1 {
		more, err := n.CreateOwners(ctx, "bench", cfg.Keys-1)
		if err != nil {
			stop()
			return target{}, func() {}, err
		}
		keys = append(keys, more...)
	}
	t := target{
		name: "node", addr: n.HTTPAddr, baseURL: n.BaseURL, apiKeys: keys,
		exited: n.Exited(), why: n.ExitNote,
	}
	return t, stop, nil
}

func existingTarget(ctx context.Context, cfg config) (target, error) {
	u, err := url.Parse(cfg.NodeURL)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return target{}, fmt.Errorf("cannot use -url %q: want http://127.0.0.1:PORT", cfg.NodeURL)
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "80"
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return target{}, fmt.Errorf("cannot use -url %q: the benchmark only sends loopback traffic", cfg.NodeURL)
	}
	keys, err := harness.ReadKeyFile(cfg.APIKeyFile)
	if err != nil {
		return target{}, err
	}
	addr := net.JoinHostPort(host, port)
	t := target{name: "node", addr: addr, baseURL: "http://" + addr, apiKeys: keys}
	readyCtx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	if err := harness.WaitHTTPOK(readyCtx, &http.Client{Timeout: 5 * time.Second}, t.baseURL+"/readyz"); err != nil {
		return target{}, fmt.Errorf("cannot see the node ready: %w", err)
	}
	return t, nil
}

// sampleIndexes picks up to n indexes spread evenly over [0, total).
func sampleIndexes(total, n int) []int {
	n = min(n, total)
	idx := make([]int, n)
	for k := range n {
		idx[k] = k * total / n
	}
	if n > 0 {
		idx[n-1] = total - 1
	}
	return idx
}
