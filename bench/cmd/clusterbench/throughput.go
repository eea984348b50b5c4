package main

import (
	"context"
	"fmt"

	"github.com/waymark/waymark/bench/harness"
)

// createTarget is the figure for create throughput at 64
// concurrent creates.
const createTarget = 5000.0

// measureThroughput runs the closed-loop create load through the leader,
// then through the first edge, which forwards every create to the leader.
func (b *bench) measureThroughput(ctx context.Context) error {
	for _, via := range []struct {
		label string
		node  *harness.ClusterNode
	}{
		{"leader", b.leader},
		{"edge (forwarded)", b.edges[0]},
	} {
		res, err := harness.RunCreates(ctx, harness.CreateLoadConfig{
			Addr:     via.node.HTTPAddr,
			APIKeys:  b.keys,
			Conns:    b.cfg.Conns,
			Warmup:   b.cfg.CreatesWarmup,
			Duration: b.cfg.CreatesDuration,
			RunID:    "tp-" + via.node.Name,
		})
		if res != nil {
			b.created += int(res.Created + res.Unmeasured)
		}
		if err != nil {
			return err
		}
		t := Throughput{
			Via: via.label, Node: via.node.Name, Conns: b.cfg.Conns,
			PerSecond: res.PerSecond(), Created: res.Created, Errors: res.Errors(),
			Statuses: statusSummary(res.Statuses), FirstError: res.FirstError,
			Latency: distribution(res.Latency),
		}
		b.rep.Creates = append(b.rep.Creates, t)
		fmt.Fprintf(b.out, "  via %s %s: %.0f creates/s, p50 %v, p99 %v, %d errors (%s)\n",
			via.label, via.node.Name, t.PerSecond, t.Latency.P50, t.Latency.P99, t.Errors, t.Statuses)
		if t.Errors > 0 {
			fmt.Fprintf(b.out, "    first error: %s\n", t.FirstError)
		}
		if t.PerSecond < createTarget {
			b.rep.miss(fmt.Sprintf("creates via %s: %.0f/s < %.0f/s", via.label, t.PerSecond, createTarget))
		}
	}
	return nil
}
