package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

// ingestNodeClickHouse starts a fresh ClickHouse and the sink's
// aggregator nodes in front of it (each `waymark node --dev
// --analytics-store clickhouse`, capture off), ships the stream through
// them as an edge would (whole segments to one aggregator; cut into
// partition parts and spread by owner over two), waits until ClickHouse
// counts every event once, and stops them all. The figure runs from the
// first request to that count.
func ingestNodeClickHouse(ctx context.Context, cfg config, sink, dir string, echo io.Writer, src harness.EventSource, total int, out io.Writer) (*SinkResult, error) {
	bin, err := harness.ResolveWaymark(cfg.Waymark)
	if err != nil {
		return nil, err
	}
	ch, err := harness.StartClickHouse(ctx, harness.ClickHouseOptions{
		Binary: cfg.ClickHouseBinary, Dir: filepath.Join(dir, "clickhouse"), CPUs: cfg.ServerCPU, Echo: echo, StartTimeout: cfg.StartTimeout,
	})
	if err != nil {
		return nil, err
	}
	defer ch.Stop()
	fmt.Fprintf(out, "%s: clickhouse %s ready at %s (pid %d)\n", sink, ch.Version, ch.HTTPAddr, ch.Pid())
	res := &SinkResult{Target: sink, Version: "ClickHouse " + ch.Version, Pid: ch.Pid()}
	procs := []*ProcessUse{{Name: "clickhouse-server", Pid: ch.Pid(), CPUs: cpuLabel(cfg.ServerCPU)}}

	n := aggregatorsOf(sink)
	nodes := make([]*harness.AggregatorNode, 0, n)
	defer func() {
		for _, nd := range nodes {
			nd.Stop()
		}
	}()
	targets := make([]harness.ShipTarget, 0, n)
	for i := range n {
		name := fmt.Sprintf("agg%d", i+1)
		args := append([]string{"--name", name, "--capture-clicks=false"}, harness.ClickHouseStoreArgs(ch, harness.ClickHouseDatabase)...)
		nd, err := harness.StartAggregatorNode(ctx, harness.NodeConfig{
			Binary: bin, DataDir: filepath.Join(dir, name), ExtraArgs: append(args, cfg.NodeArgs...), Echo: echo,
			StartTimeout: cfg.StartTimeout, CPUs: cfg.ServerCPU, Name: name,
		})
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, nd)
		targets = append(targets, harness.ShipTarget{Name: name, URL: nd.PeerURL, Token: nd.Token, HTTP: nd.Peer})
		procs = append(procs, &ProcessUse{Name: name, Pid: nd.Pid(), CPUs: cpuLabel(cfg.ServerCPU)})
		fmt.Fprintf(out, "%s: aggregator %s ready at %s (pid %d), schema migrated\n", sink, name, nd.HTTPAddr, nd.Pid())
	}
	res.Version = "waymark " + harness.DescribeBinary(bin) + " + " + res.Version
	if base, err := harness.CountClickHouseEvents(ctx, ch, harness.ClickHouseDatabase); err != nil || base != 0 {
		return nil, fmt.Errorf("a fresh clickhouse holds %d events (%v); want 0", base, err)
	}

	shipper, err := harness.NewSegmentShipper(targets[0].URL, targets[0].Token, "aggbench-edge")
	if err != nil {
		return nil, err
	}
	shipper.HTTP = targets[0].HTTP
	defer shipper.Close()
	cpu0 := make([]time.Duration, len(procs))
	for i, p := range procs {
		cpu0[i], _ = harness.GroupCPU(p.Pid)
	}
	var st harness.IngestStats
	if n == 1 {
		fmt.Fprintf(out, "%s: shipping %d events, %d per segment, %d segments per batch, whole\n", sink, total, cfg.SegmentEvents, cfg.SegmentsPerBatch)
		st, err = harness.ShipEvents(ctx, shipper, src, cfg.SegmentEvents, cfg.SegmentsPerBatch, total, out)
		res.Parts = (total + cfg.SegmentEvents - 1) / cfg.SegmentEvents
	} else {
		fmt.Fprintf(out, "%s: shipping %d events, %d per segment, %d segments per round, cut into partition parts over %d aggregators\n",
			sink, total, cfg.SegmentEvents, cfg.SegmentsPerBatch, n)
		var sst harness.SplitStats
		sst, err = harness.ShipEventsSplit(ctx, shipper, targets, src, cfg.SegmentEvents, cfg.SegmentsPerBatch, total, out)
		st, res.Parts, res.Aggregators = sst.IngestStats, sst.Parts, sst.Targets
	}
	if err != nil {
		return nil, fmt.Errorf("cannot ship through the aggregators: %w", err)
	}
	acked := time.Now()
	seen, counted, err := harness.WaitClickHouseEvents(ctx, ch, harness.ClickHouseDatabase, uint64(total), cfg.CountTimeout)
	res.Counted = counted
	if err != nil {
		return nil, err
	}
	st.Elapsed += seen.Sub(acked)
	res.CountOK = true
	var cpu time.Duration
	for i, p := range procs {
		c, _ := harness.GroupCPU(p.Pid)
		p.CPUSeconds = (c - cpu0[i]).Seconds()
		p.PeakRSSBytes, _ = harness.PeakRSS(p.Pid)
		cpu += c - cpu0[i]
	}
	res.fill(st, cpu)
	for _, p := range procs {
		res.Processes = append(res.Processes, *p)
		res.PeakRSSBytes += p.PeakRSSBytes
	}
	res.DiskBytes = harness.DirSize(filepath.Join(dir, "clickhouse", "data"))
	return res, nil
}
