package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

// Takedown bounds and target.
const (
	takedownTimeout = 30 * time.Second // per takedown, for every node to answer 410
	takedownTarget  = time.Second      // issue: p99 of the last node's 410
)

// measureTakedowns creates a link through the leader, fetches it once on
// every node (so caches hold it), deletes it through an edge (alternating
// between the edges) and polls every node until it answers 410. It records
// the time from sending the DELETE to its acknowledgement, to the 410 of
// the edge that took it, and to the 410 of the last node.
func (b *bench) measureTakedowns(ctx context.Context) error {
	api := newAPIClient()
	defer api.close()
	nodes := b.cluster.Nodes()
	ack, last, viaEdge := harness.NewHistogram(), harness.NewHistogram(), harness.NewHistogram()
	perNode := make([]*harness.Histogram, len(nodes))
	for i := range perNode {
		perNode[i] = harness.NewHistogram()
	}
	key := b.keys[len(b.keys)-1]
	for t := range b.cfg.Takedowns {
		dest := fmt.Sprintf("https://example.com/takedown/%d", t)
		c, err := api.create(ctx, b.leader.BaseURL, key, dest)
		if err != nil {
			return err
		}
		b.created++
		for _, n := range nodes {
			status, loc, err := api.redirect(ctx, n.BaseURL, c.code)
			if err != nil {
				return err
			}
			if status != http.StatusFound || loc != dest {
				return fmt.Errorf("GET /%s on %s before the takedown: got %d Location %q; want 302 %q", c.code, n.Name, status, loc, dest)
			}
		}
		via := b.edges[t%len(b.edges)]
		sent := time.Now()
		if err := api.takeDown(ctx, via.BaseURL, key, c.code); err != nil {
			return err
		}
		ack.Record(time.Since(sent))
		times, err := b.wait410(ctx, api, nodes, c.code, sent)
		if err != nil {
			return err
		}
		var worst time.Duration
		for i, d := range times {
			perNode[i].Record(d)
			worst = max(worst, d)
			if nodes[i] == via {
				viaEdge.Record(d)
			}
		}
		last.Record(worst)
	}
	res := TakedownResult{
		Takedowns: b.cfg.Takedowns, Nodes: len(nodes),
		Ack: distribution(ack), ViaEdge: distribution(viaEdge), AllNodes: distribution(last), PerNode: map[string]Distribution{},
	}
	fmt.Fprintf(b.out, "  DELETE acknowledged: p50 %v, p99 %v; 410 on all %d nodes: p50 %v, p99 %v, max %v (%d takedowns)\n",
		res.Ack.P50, res.Ack.P99, len(nodes), res.AllNodes.P50, res.AllNodes.P99, res.AllNodes.Max, res.Takedowns)
	fmt.Fprintf(b.out, "    410 on the edge that took the DELETE: p50 %v, p99 %v\n", res.ViaEdge.P50, res.ViaEdge.P99)
	for i, n := range nodes {
		d := distribution(perNode[i])
		res.PerNode[n.Name] = d
		fmt.Fprintf(b.out, "    %s: p50 %v, p99 %v, max %v\n", n.Name, d.P50, d.P99, d.Max)
	}
	b.rep.Takedown = &res
	if res.AllNodes.P99 >= takedownTarget {
		b.rep.miss(fmt.Sprintf("takedown p99 %v >= %v", res.AllNodes.P99, takedownTarget))
	}
	return nil
}

// wait410 polls every node, each in its own goroutine, until GET /code
// answers 410, and returns each node's time since sent.
func (b *bench) wait410(ctx context.Context, api *apiClient, nodes []*harness.ClusterNode, code string, sent time.Time) ([]time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, takedownTimeout)
	defer cancel()
	times := make([]time.Duration, len(nodes))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			last := 0
			for {
				status, _, err := api.redirect(ctx, n.BaseURL, code)
				if err != nil {
					errs[i] = fmt.Errorf("%s (last status %d): %w", n.Name, last, err)
					return
				}
				if status == http.StatusGone {
					times[i] = time.Since(sent)
					return
				}
				last = status
				pause(ctx, b.cfg.Poll)
			}
		})
	}
	wg.Wait()
	return times, errors.Join(errs...)
}
