package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

// server is one server under test, running until the run ends.
type server struct {
	name  string
	what  string // the table's description
	addr  string
	paths [][]byte
	// wrkRequests is the file of requests wrk cycles through.
	wrkRequests string
	pgid        int   // its process group: whose CPU time is its cost
	extra       []int // groups reported beside it (the edge's aggregator)
	exited      []<-chan struct{}
	why         func() string
	affinity    string // the CPUs it may run on, as the kernel says
	cpuNote     string // where its helpers run, for the report
}

func (s *server) dead() bool {
	for _, ch := range s.exited {
		if harness.IsClosed(ch) {
			return true
		}
	}
	return false
}

// fleet is every process the run started, stopped in reverse order.
type fleet struct {
	servers []*server
	groups  []int // every server's and helper's process group, for the idle wait
	stops   []func()
	dir     string
	out     io.Writer
	// shipCheck, set with an edge, checks its clicks reach its aggregator.
	shipCheck func(context.Context) error
}

func (f *fleet) stop() {
	for i := len(f.stops) - 1; i >= 0; i-- {
		f.stops[i]()
	}
	if f.dir != "" {
		os.RemoveAll(f.dir)
	}
}

func (f *fleet) onStop(fn func()) { f.stops = append(f.stops, fn) }

var nodeWriteRate = harness.NodeWriteRateArgs

// startFleet starts every target of cfg, loads the links into the nodes
// and maps the same codes in nginx. On error, whatever started is stopped
// by f.stop, which the caller always runs.
func startFleet(ctx context.Context, cfg config, echo, out io.Writer) (*fleet, error) {
	f := &fleet{out: out}
	dir, err := os.MkdirTemp("", "redirectmatrix-")
	if err != nil {
		return f, fmt.Errorf("cannot create a temp dir: %w", err)
	}
	f.dir = dir
	var bin string
	if cfg.has(targetDevNoCap) || cfg.has(targetDev) || cfg.has(targetDevFoldNow) || cfg.has(targetEdge) {
		if bin, err = harness.ResolveWaymark(cfg.Waymark); err != nil {
			return f, err
		}
	}
	if cfg.has(targetNginx) {
		if _, err := harness.FindNginx(cfg.NginxBinary); err != nil {
			return f, err // before minutes of loading links
		}
	}

	// Nodes first: nginx maps the codes of the first node loaded, so every
	// server answers the same kind of path.
	var codeSource *server
	var codes []string
	for _, name := range cfg.Targets {
		var s *server
		var c []string
		switch name {
		case targetDevNoCap:
			s, c, err = f.startDevNode(ctx, cfg, bin, echo, name, "`waymark node --dev`, `--capture-clicks=false`", "--capture-clicks=false")
		case targetDev:
			s, c, err = f.startDevNode(ctx, cfg, bin, echo, name, "`waymark node --dev` (capture on, aggregates itself)")
		case targetDevFoldNow:
			s, c, err = f.startDevNode(ctx, cfg, bin, echo, name, "`waymark node --dev --analytics-defer-busy=0` (folds at once)", "--analytics-defer-busy=0")
		case targetEdge:
			s, c, err = f.startEdge(ctx, cfg, bin, echo)
		default:
			continue
		}
		if err != nil {
			return f, err
		}
		if codeSource == nil {
			codeSource, codes = s, c
		}
		f.servers = append(f.servers, s)
	}
	if codes == nil {
		codes = syntheticCodes(cfg.Links)
		fmt.Fprintf(out, "no node among the targets: %d synthetic codes\n", len(codes))
	}
	paths := pathsOf(codes)
	if cfg.has(targetFloor) {
		s, err := f.startFloor(ctx, cfg, echo, paths)
		if err != nil {
			return f, err
		}
		f.servers = append(f.servers, s)
	}
	if cfg.has(targetNginx) {
		s, err := f.startNginx(ctx, cfg, echo, codes)
		if err != nil {
			return f, err
		}
		f.servers = append(f.servers, s)
	}
	// Report in the order asked for.
	ordered := make([]*server, 0, len(f.servers))
	for _, name := range cfg.Targets {
		for _, s := range f.servers {
			if s.name == name {
				ordered = append(ordered, s)
			}
		}
	}
	f.servers = ordered
	return f, nil
}

func (f *fleet) startDevNode(ctx context.Context, cfg config, bin string, echo io.Writer, name, what string, args ...string) (*server, []string, error) {
	n, err := f.node(ctx, cfg, bin, echo, name, cfg.ServerCPU, 0, append(append(args, nodeWriteRate...), cfg.NodeArgs...))
	if err != nil {
		return nil, nil, err
	}
	s := &server{
		name: name, what: what, addr: n.HTTPAddr, pgid: n.Pid(),
		exited: []<-chan struct{}{n.Exited()}, why: n.ExitNote,
	}
	codes, err := loadLinks(ctx, cfg, n, f.out)
	if err != nil {
		return nil, nil, err
	}
	s.paths = pathsOf(codes)
	return s, codes, nil
}

// startEdge starts the separate aggregator (`--role voter,aggregator`),
// then the edge (`--role voter,edge`) that ships to it. Both are --dev
// single-node clusters of their own holding the same cluster key, which
// is what makes the edge's ship token the aggregator's.
func (f *fleet) startEdge(ctx context.Context, cfg config, bin string, echo io.Writer) (*server, []string, error) {
	keyFile := filepath.Join(f.dir, "cluster-key")
	if _, err := harness.WriteClusterKey(ctx, bin, keyFile); err != nil {
		return nil, nil, err
	}
	agg, err := f.node(ctx, cfg, bin, echo, "aggregator", cfg.AggregatorCPU, cfg.AggregatorNice,
		append([]string{"--role", "voter,aggregator", "--cluster-key-file", keyFile}, cfg.NodeArgs...))
	if err != nil {
		return nil, nil, err
	}
	edge, err := f.node(ctx, cfg, bin, echo, targetEdge, cfg.ServerCPU, 0,
		append(append([]string{"--role", "voter,edge", "--cluster-key-file", keyFile, "--aggregator-url", agg.BaseURL}, nodeWriteRate...), cfg.NodeArgs...))
	if err != nil {
		return nil, nil, err
	}
	aggAdmin, err := harness.NewDevAdminClient(agg.DataDir)
	if err != nil {
		return nil, nil, err
	}
	cpu := "unpinned"
	if cfg.AggregatorCPU != "" {
		cpu = "CPU " + cfg.AggregatorCPU
	}
	if cfg.AggregatorNice > 0 {
		cpu += fmt.Sprintf(" at nice %d", cfg.AggregatorNice)
	}
	s := &server{
		name: targetEdge, what: "`--role voter,edge`, capture on, aggregator elsewhere",
		addr: edge.HTTPAddr, pgid: edge.Pid(), extra: []int{agg.Pid()},
		exited:  []<-chan struct{}{edge.Exited(), agg.Exited()},
		why:     func() string { return "edge: " + edge.ExitNote() + "; aggregator: " + agg.ExitNote() },
		cpuNote: "aggregator on " + cpu,
	}
	codes, err := loadLinks(ctx, cfg, edge, f.out)
	if err != nil {
		return nil, nil, err
	}
	s.paths = pathsOf(codes)
	f.shipCheck = func(ctx context.Context) error { return checkShipping(ctx, aggAdmin, f.out) }
	return s, codes, nil
}

func (f *fleet) node(ctx context.Context, cfg config, bin string, echo io.Writer, name, cpus string, nice int, args []string) (*harness.Node, error) {
	dir := filepath.Join(f.dir, name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cannot create a data dir: %w", err)
	}
	started := time.Now()
	n, err := harness.StartDevNode(ctx, harness.NodeConfig{
		Binary: bin, DataDir: dir, ExtraArgs: args, Echo: echo, StartTimeout: cfg.StartTimeout, CPUs: cpus, Nice: nice, Name: name,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot start %s: %w", name, err)
	}
	f.onStop(func() {
		if err := n.Stop(); err != nil {
			fmt.Fprintln(f.out, "redirectmatrix:", err)
		}
	})
	f.groups = append(f.groups, n.Pid())
	fmt.Fprintf(f.out, "%s: %s node --dev %s ready at %s (pid %d, CPU %s) in %v\n",
		name, bin, strings.Join(args, " "), n.HTTPAddr, n.Pid(), cpuLabel(cpus), time.Since(started).Round(time.Millisecond))
	return n, nil
}

func (f *fleet) startFloor(ctx context.Context, cfg config, echo io.Writer, paths [][]byte) (*server, error) {
	bc := cfg.Baseline
	bc.Name, bc.Echo, bc.CPUs = targetFloor, echo, cfg.ServerCPU
	child, addr, err := harness.StartBaselineChild(ctx, bc)
	if err != nil {
		return nil, fmt.Errorf("cannot start the floor: %w", err)
	}
	f.onStop(func() { child.Stop() })
	f.groups = append(f.groups, child.Pid())
	fmt.Fprintf(f.out, "floor: bare fasthttp constant 302 at %s (pid %d, CPU %s)\n", addr, child.Pid(), cpuLabel(cfg.ServerCPU))
	return &server{
		name: targetFloor, what: "bare fasthttp constant 302 (floor)", addr: addr, paths: paths, pgid: child.Pid(),
		exited: []<-chan struct{}{child.Exited()}, why: child.ExitNote,
	}, nil
}

func (f *fleet) startNginx(ctx context.Context, cfg config, echo io.Writer, codes []string) (*server, error) {
	routes := make([]harness.NginxRoute, len(codes))
	for i, c := range codes {
		routes[i] = harness.NginxRoute{Path: "/" + c, Location: harness.BenchURL(i)}
	}
	dir := filepath.Join(f.dir, targetNginx)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create the nginx dir: %w", err)
	}
	n, err := harness.StartNginx(ctx, harness.NginxOptions{
		Binary: cfg.NginxBinary, Dir: dir, Routes: routes, CacheControl: nodeCacheControl,
		CPUs: cfg.ServerCPU, Echo: echo, StartTimeout: cfg.StartTimeout,
	})
	if err != nil {
		return nil, err
	}
	f.onStop(func() { n.Stop() })
	f.groups = append(f.groups, n.Pid())
	if err := n.CheckPidFile(); err != nil {
		return nil, err
	}
	fmt.Fprintf(f.out, "nginx: one worker, map of %d codes, at %s (master pid %d, CPU %s)\n", len(codes), n.Addr, n.Pid(), cpuLabel(cfg.ServerCPU))
	return &server{
		name: targetNginx, what: fmt.Sprintf("nginx 1 worker, `map` of the same %d codes", len(codes)),
		addr: n.Addr, paths: pathsOf(codes), pgid: n.Pid(),
		exited: []<-chan struct{}{n.Exited()}, why: n.ExitNote,
	}, nil
}

// nodeCacheControl is what a node sends with a 302 at its default
// --redirect-max-age; nginx sends the same.
const nodeCacheControl = "private, max-age=60"

func cpuLabel(cpus string) string {
	if cpus == "" {
		return "unpinned"
	}
	return cpus
}

func pathsOf(codes []string) [][]byte {
	paths := make([][]byte, len(codes))
	for i, c := range codes {
		paths[i] = []byte("/" + c)
	}
	return paths
}

// syntheticCodes stands in for node codes when no node is measured.
func syntheticCodes(n int) []string {
	codes := make([]string, n)
	for i := range codes {
		codes[i] = fmt.Sprintf("a%06d", i%1_000_000)
	}
	return codes
}

func loadLinks(ctx context.Context, cfg config, n *harness.Node, out io.Writer) ([]string, error) {
	if cfg.Domain != "" {
		if err := harness.RegisterDevDomain(ctx, n, cfg.Domain); err != nil {
			return nil, err
		}
	}
	return harness.LoadNodeLinksOn(ctx, n, cfg.Domain, cfg.Links, cfg.LoadWorkers, out)
}

// checkShipping waits until the separate aggregator holds clicks: the
// edge's priming pass made some, so none means the edge does not reach
// it (wrong URL or token) and its figures would leave out shipping.
func checkShipping(ctx context.Context, agg *harness.AdminClient, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		n, err := agg.EventsCount(ctx, "", "")
		if err == nil && n > 0 {
			fmt.Fprintf(out, "edge: its aggregator holds %d clicks: shipping works\n", n)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cannot see the edge's clicks reach its aggregator within 60 s (last count error: %v)", err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
