package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"syscall"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

func run(ctx context.Context, cfg config, out io.Writer) error {
	var echo io.Writer
	if cfg.Verbose {
		echo = cfg.LogOut
	}
	loadAffinity, _ := harness.Affinity(0)
	if cfg.LoadGen == "wrk" && cfg.LoadCPU != "" {
		loadAffinity = cfg.LoadCPU // wrk is started under taskset -c LoadCPU
	}
	fmt.Fprintf(out, "redirectmatrix: %v; %d links, %d visitors, %d conns, %v warmup + %v measured per run, %d rounds; load generator %s on CPU %s, servers on CPU %s; load average %s\n",
		cfg.Targets, cfg.Links, cfg.Visitors, cfg.Conns, cfg.Warmup, cfg.Duration, cfg.Rounds, cfg.LoadGen, cpuLabel(cfg.LoadCPU), cpuLabel(cfg.ServerCPU), harness.LoadAverage())

	f, err := startFleet(ctx, cfg, echo, out)
	defer f.stop()
	if err != nil {
		return err
	}
	visitors, err := harness.MakeVisitors(cfg.Visitors)
	if err != nil {
		return err
	}
	rep := newReport(cfg, loadAffinity)
	for _, s := range f.servers {
		if s.affinity, err = harness.Affinity(s.pgid); err != nil {
			return err
		}
		status, size, err := harness.ResponseBytesHost(s.addr, cfg.Domain, string(s.paths[0]))
		if err != nil {
			return err
		}
		if status != 302 {
			return fmt.Errorf("%s answers %s with %d; want 302", s.name, s.paths[0], status)
		}
		rep.Servers = append(rep.Servers, ServerInfo{Name: s.name, What: s.what, Pid: s.pgid, Helpers: s.extra, Affinity: s.affinity, Note: s.cpuNote, ResponseBytes: size, Paths: len(s.paths)})
	}
	if cfg.LoadGen == "wrk" {
		// wrk cycles through a file of requests made here: paths and
		// visitors at random, twice as many as links (at least 50,000).
		count := min(max(2*cfg.Links, 50_000), 400_000)
		for i, s := range f.servers {
			s.wrkRequests = filepath.Join(f.dir, s.name+".requests")
			if err := harness.WrkRequests(s.wrkRequests, withQuery(s.paths, cfg.Query), visitors, count, cfg.Seed+uint64(i)); err != nil {
				return err
			}
		}
	}
	if cfg.Prime {
		for _, s := range f.servers {
			if err := prime(ctx, cfg, out, s, visitors); err != nil {
				return err
			}
		}
	}
	if f.shipCheck != nil {
		if err := f.shipCheck(ctx); err != nil {
			return err
		}
	}
	for r := range cfg.Rounds {
		round := Round{Number: r + 1}
		for k := range f.servers {
			// Rotate the order, so each server meets each slot (and the
			// machine's drift) as often as the others.
			s := f.servers[(k+r)%len(f.servers)]
			m, err := measure(ctx, cfg, f, s, r, visitors)
			if err != nil {
				return err
			}
			printRun(out, round.Number, m)
			round.Runs = append(round.Runs, m)
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
	if n := rep.errors(); n > 0 {
		return fmt.Errorf("%d requests failed; the figures are not valid", n)
	}
	return nil
}

// measure runs one load against s once every server is idle, reading the
// CPU time of s (and of its helpers) at the window's edges.
func measure(ctx context.Context, cfg config, f *fleet, s *server, r int, visitors []harness.Visitor) (Measurement, error) {
	waited, idle, err := harness.WaitIdle(ctx, harness.IdleConfig{Groups: f.groups, MaxShare: cfg.IdleShare, Sample: cfg.IdleSample, Timeout: cfg.IdleTimeout})
	if err != nil {
		return Measurement{}, err
	}
	m := Measurement{Target: s.name, IdleWaitSeconds: waited.Seconds(), StartedIdle: idle, LoadAverage: harness.LoadAverage()}
	var cpu, extra, self [2]time.Duration
	var machine [2]harness.CPUTimes
	var cpuErr error
	read := func(i int) func() {
		return func() {
			machine[i], _ = harness.ReadCPUTimes()
			self[i] = selfCPU()
			d, err := harness.GroupCPU(s.pgid)
			if err != nil && cpuErr == nil {
				cpuErr = err
			}
			cpu[i] = d
			for _, g := range s.extra {
				if d, err := harness.GroupCPU(g); err == nil {
					extra[i] += d
				}
			}
		}
	}
	var window, loadGenCPU time.Duration
	var answered uint64
	if cfg.LoadGen == "wrk" {
		if cfg.Warmup > 0 {
			if _, err := runWrk(ctx, cfg, f, s, cfg.Warmup, nil, nil); err != nil {
				return m, err
			}
		}
		res, err := runWrk(ctx, cfg, f, s, cfg.Duration, read(0), read(1))
		if err != nil {
			return m, err
		}
		m.RPS, m.RunFigures = res.RPS(), res.Figures()
		window, answered, loadGenCPU = res.Elapsed(), res.Requests, res.CPU
	} else {
		res, err := harness.RunLoad(ctx, harness.LoadConfig{
			Addr: s.addr, Paths: s.paths, Conns: cfg.Conns, Visitors: visitors,
			Warmup: cfg.Warmup, Duration: cfg.Duration, Seed: cfg.Seed + uint64(r),
			AtWindowStart: read(0), AtWindowEnd: read(1),
		})
		if err != nil {
			return m, err
		}
		m.RPS = res.RPS()
		m.RunFigures = harness.NewRunFigures(res.Latency, res.OK, res.Errors(), res.Statuses, res.TransportErrors, res.FirstError)
		window, answered, loadGenCPU = res.Elapsed, res.OK+res.BadStatus, self[1]-self[0]
	}
	if s.dead() {
		return m, fmt.Errorf("%s died during round %d: %s", s.name, r+1, s.why())
	}
	if cpuErr != nil {
		return m, fmt.Errorf("cannot read the CPU time of %s: %w", s.name, cpuErr)
	}
	used := cpu[1] - cpu[0]
	if answered > 0 {
		m.CPUMicrosPerRequest = harness.Micros(used) / float64(answered)
	}
	if window > 0 {
		w := window.Seconds()
		m.CPUShare = used.Seconds() / w
		helpers := extra[1] - extra[0]
		if len(s.extra) > 0 {
			m.HelperCPUShare = helpers.Seconds() / w
		}
		m.LoadGenCPUShare = loadGenCPU.Seconds() / w
		// What else ran on the two CPUs: their busy time less ours. The
		// helpers (the edge's aggregator) count as ours on their CPU.
		if cfg.ServerCPU != "" && machine[0] != nil && machine[1] != nil {
			onServer := harness.BusyOn(machine[0], machine[1], cfg.ServerCPU) - used
			onLoad := harness.BusyOn(machine[0], machine[1], cfg.LoadCPU) - loadGenCPU - (self[1] - self[0])
			if cfg.AggregatorCPU == cfg.ServerCPU {
				onServer -= helpers
			} else if cfg.AggregatorCPU == cfg.LoadCPU {
				onLoad -= helpers
			}
			if cfg.LoadGen == "go" {
				onLoad += self[1] - self[0] // counted once, as the load generator
			}
			m.OthersOnServerCPU = max(onServer.Seconds()/w, 0)
			m.OthersOnLoadCPU = max(onLoad.Seconds()/w, 0)
		}
	}
	return m, nil
}

// selfCPU is this process's own CPU time: the harness, and with -loadgen
// go the load generator.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func runWrk(ctx context.Context, cfg config, f *fleet, s *server, d time.Duration, atStart, atEnd func()) (*harness.WrkResult, error) {
	var echo io.Writer
	if cfg.Verbose {
		echo = cfg.LogOut
	}
	res, err := harness.RunWrk(ctx, harness.WrkConfig{
		Binary: cfg.WrkBinary, Dir: f.dir, Addr: s.addr, Host: cfg.Domain, Requests: s.wrkRequests, Conns: cfg.Conns, Duration: d,
		CPUs: cfg.LoadCPU, Echo: echo, AtStart: atStart, AtEnd: atEnd,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot run wrk against %s: %w", s.name, err)
	}
	return res, nil
}

// prime requests every path of s once, so the rounds measure warm caches.
func prime(ctx context.Context, cfg config, out io.Writer, s *server, visitors []harness.Visitor) error {
	res, err := harness.RunLoad(ctx, harness.LoadConfig{
		Addr: s.addr, Host: cfg.Domain, Paths: s.paths, Conns: cfg.Conns, Duration: 10 * time.Minute, EachOnce: true, Visitors: visitors,
	})
	if err != nil {
		return fmt.Errorf("cannot prime %s: %w", s.name, err)
	}
	if res.Errors() > 0 {
		return fmt.Errorf("cannot prime %s: %d of %d requests failed (%s; first: %s)", s.name, res.Errors(), len(s.paths), res.StatusSummary(), res.FirstError)
	}
	fmt.Fprintf(out, "primed %s: each of %d paths once in %v\n", s.name, len(s.paths), res.Elapsed.Round(time.Millisecond))
	return nil
}

// withQuery is paths with "?"+query appended to each (-query), the load of
// a campaign link's visits; the priming and checks use the bare paths.
func withQuery(paths [][]byte, query string) [][]byte {
	if query == "" {
		return paths
	}
	out := make([][]byte, len(paths))
	for i, p := range paths {
		out[i] = append(append(append([]byte(nil), p...), '?'), query...)
	}
	return out
}
