package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

// lagTimeout bounds the wait for one create to reach every edge.
const lagTimeout = 30 * time.Second

// measureLag creates links one at a time through the leader and, for each,
// polls every edge's replica index until it covers the create's
// Waymark-Index. The lag of a sample is the time from the create's
// acknowledgement to the answer of the poll that first saw it applied on
// the last edge, so it includes one poll round trip and up to -poll of
// waiting. The edges' own GET /{code} cannot show this: a node that has
// not applied a fresh code asks the leader (read-your-writes).
//
// It runs once on an idle cluster and once more under a background create
// load, which is when followers really trail.
func (b *bench) measureLag(ctx context.Context) error {
	api := newAPIClient()
	defer api.close()
	res, err := b.lagPass(ctx, api, "idle", "idle", b.cfg.LagSamples)
	if err != nil {
		return err
	}
	b.rep.Lag = append(b.rep.Lag, res)
	if b.cfg.LagLoadConns == 0 {
		return nil
	}

	loadCtx, stopLoad := context.WithCancel(ctx)
	type loadOutcome struct {
		res *harness.CreateResult
		err error
	}
	done := make(chan loadOutcome, 1)
	go func() {
		r, err := harness.RunCreates(loadCtx, harness.CreateLoadConfig{
			Addr: b.leader.HTTPAddr, APIKeys: b.keys, Conns: b.cfg.LagLoadConns,
			Duration: time.Hour, RunID: "lagload",
		})
		done <- loadOutcome{r, err}
	}()
	pause(ctx, time.Second) // let the load reach a steady state
	res, err = b.lagPass(ctx, api, fmt.Sprintf("under %d-conn create load", b.cfg.LagLoadConns), "loaded", b.cfg.LagSamples)
	stopLoad()
	load := <-done
	if load.res != nil {
		b.created += int(load.res.Created + load.res.Unmeasured)
	}
	if err != nil {
		return err
	}
	if load.err != nil && !errors.Is(load.err, context.Canceled) {
		return fmt.Errorf("background load: %w", load.err)
	}
	if load.res != nil {
		res.BackgroundPerSecond = load.res.PerSecond()
		fmt.Fprintf(b.out, "    background load: %.0f creates/s, %d errors\n", res.BackgroundPerSecond, load.res.Errors())
	}
	b.rep.Lag = append(b.rep.Lag, res)
	return nil
}

// lagPass measures one pass; slug goes into the destination URLs.
func (b *bench) lagPass(ctx context.Context, api *apiClient, label, slug string, samples int) (LagResult, error) {
	all := harness.NewHistogram()
	perEdge := make([]*harness.Histogram, len(b.edges))
	for i := range perEdge {
		perEdge[i] = harness.NewHistogram()
	}
	key := b.keys[0]
	for s := range samples {
		c, err := api.create(ctx, b.leader.BaseURL, key, fmt.Sprintf("https://example.com/lag/%s/%d", slug, s))
		if err != nil {
			return LagResult{}, err
		}
		b.created++
		lags, err := b.waitApplied(ctx, c)
		if err != nil {
			return LagResult{}, err
		}
		var worst time.Duration
		for i, l := range lags {
			perEdge[i].Record(l)
			worst = max(worst, l)
		}
		all.Record(worst)
	}
	res := LagResult{Label: label, Samples: samples, AllEdges: distribution(all), PerEdge: map[string]Distribution{}}
	fmt.Fprintf(b.out, "  %s: ack -> applied on every edge p50 %v, p99 %v, max %v (%d samples)\n",
		label, res.AllEdges.P50, res.AllEdges.P99, res.AllEdges.Max, samples)
	for i, e := range b.edges {
		d := distribution(perEdge[i])
		res.PerEdge[e.Name] = d
		fmt.Fprintf(b.out, "    %s: p50 %v, p99 %v, max %v\n", e.Name, d.P50, d.P99, d.Max)
	}
	return res, nil
}

// waitApplied polls every edge, each in its own goroutine, until its
// replica covers c.index, and returns each edge's lag after c.acked.
func (b *bench) waitApplied(ctx context.Context, c created) ([]time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, lagTimeout)
	defer cancel()
	lags := make([]time.Duration, len(b.edges))
	errs := make([]error, len(b.edges))
	var wg sync.WaitGroup
	for i, e := range b.edges {
		wg.Go(func() {
			for {
				st, err := b.cluster.Replica(ctx, e)
				if err != nil {
					errs[i] = err
					return
				}
				if st.AppliedIndex >= c.index {
					lags[i] = max(time.Since(c.acked), 0)
					return
				}
				if ctx.Err() != nil {
					errs[i] = fmt.Errorf("%s did not apply index %d (at %d): %w", e.Name, c.index, st.AppliedIndex, ctx.Err())
					return
				}
				pause(ctx, b.cfg.Poll)
			}
		})
	}
	wg.Wait()
	return lags, errors.Join(errs...)
}
