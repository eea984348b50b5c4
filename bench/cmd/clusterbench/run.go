package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

// writeRate is passed to every node: the default (100 writes/s per API
// key) would measure the rate limiter, not the cluster.
const writeRate = "100000"

// members is the cluster under test: one voter per region, two edges.
var members = []harness.ClusterMember{
	{Name: "v1", Region: "us", Role: harness.RoleVoter},
	{Name: "v2", Region: "eu", Role: harness.RoleVoter},
	{Name: "v3", Region: "ap", Role: harness.RoleVoter},
	{Name: "e1", Region: "eu", Role: harness.RoleEdge},
	{Name: "e2", Region: "ap", Role: harness.RoleEdge},
}

// newEdge joins for the catch-up measurement.
var newEdge = harness.ClusterMember{Name: "e3", Region: "us", Role: harness.RoleEdge}

// bench holds what the phases share.
type bench struct {
	cfg     config
	out     io.Writer
	cluster *harness.Cluster
	leader  *harness.ClusterNode
	edges   []*harness.ClusterNode
	keys    []string
	created int // links created so far, every phase included
	rep     *Report
}

func run(ctx context.Context, cfg config, out io.Writer) (err error) {
	bin, err := harness.ResolveWaymark(cfg.Waymark)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "clusterbench-")
	if err != nil {
		return fmt.Errorf("cannot create temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	var echo io.Writer
	if cfg.Verbose {
		echo = cfg.LogOut
	}
	b := &bench{cfg: cfg, out: out, rep: newReport(cfg)}
	fmt.Fprintf(out, "clusterbench: 3 voters (us, eu, ap) + 2 edges on 127.0.0.1, %d owners, %d conns; GOMAXPROCS %d, %d CPUs\n",
		cfg.Owners, cfg.Conns, runtime.GOMAXPROCS(0), runtime.NumCPU())

	started := time.Now()
	b.cluster, err = harness.StartCluster(ctx, harness.ClusterConfig{
		Binary: bin, Dir: dir, Members: members,
		NodeArgs:     append([]string{"--write-rate", writeRate, "--create-rate-ip", "0", "--create-rate-key", "0", "--create-rate-domain", "0"}, cfg.NodeArgs...),
		Echo:         echo,
		StartTimeout: cfg.StartTimeout,
	})
	if err != nil {
		return fmt.Errorf("cannot start the cluster: %w", err)
	}
	defer func() {
		fmt.Fprintln(out, "stopping the cluster")
		if stopErr := b.cluster.Stop(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	if err := b.setUp(ctx, time.Since(started)); err != nil {
		return err
	}
	phases := []struct {
		name string
		skip bool
		run  func(context.Context) error
	}{
		{"create throughput", false, b.measureThroughput},
		{"replication lag", b.cfg.LagSamples == 0, b.measureLag},
		{"takedown propagation", b.cfg.Takedowns == 0, b.measureTakedowns},
		{"snapshot catch-up", b.cfg.SkipCatchup, b.measureCatchup},
	}
	for _, p := range phases {
		if p.skip {
			continue
		}
		fmt.Fprintf(out, "== %s\n", p.name)
		if err := p.run(ctx); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		if err := b.cluster.CheckAlive(); err != nil {
			return fmt.Errorf("after %s: %w", p.name, err)
		}
	}
	b.rep.finish(b.created)
	b.rep.print(out)
	if cfg.Out != "" {
		if err := harness.WriteJSON(cfg.Out, b.rep); err != nil {
			return err
		}
		fmt.Fprintf(out, "results written to %s\n", cfg.Out)
	}
	if cfg.Check && len(b.rep.Misses) > 0 {
		return fmt.Errorf("%w: %s", errMissedTarget, strings.Join(b.rep.Misses, "; "))
	}
	return nil
}

// setUp finds the leader and the edges and makes the owners.
func (b *bench) setUp(ctx context.Context, formed time.Duration) error {
	c := b.cluster
	leaderCtx, cancel := context.WithTimeout(ctx, b.cfg.StartTimeout)
	defer cancel()
	leader, err := c.Leader(leaderCtx)
	if err != nil {
		return err
	}
	b.leader = leader
	for _, n := range c.Nodes() {
		if n.Role == harness.RoleEdge {
			b.edges = append(b.edges, n)
		}
		b.rep.Nodes = append(b.rep.Nodes, fmt.Sprintf("%s (%s, %s) http %s", n.Name, n.Region, n.Role, n.HTTPAddr))
	}
	b.rep.Leader = leader.Name
	b.rep.Formed = formed
	fmt.Fprintf(b.out, "cluster formed in %v; leader %s (%s)\n", formed.Round(time.Millisecond), leader.Name, leader.Region)
	for _, line := range b.rep.Nodes {
		fmt.Fprintln(b.out, "  "+line)
	}
	if b.keys, err = c.CreateOwners(ctx, leader, "bench", b.cfg.Owners); err != nil {
		return err
	}
	return nil
}
