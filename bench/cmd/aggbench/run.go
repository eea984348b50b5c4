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

// Rollup counters of the node's /metrics that say what it did with the
// events it was sent.
const (
	metricStored  = "waymark_rollup_events_stored_total"
	metricLate    = "waymark_rollup_events_late_total"
	metricDedup   = "waymark_rollup_events_deduplicated_total"
	metricDropped = "waymark_rollup_events_dropped_total" // expired, future
)

const eventsTable = "events"

func run(ctx context.Context, cfg config, out io.Writer) error {
	var echo io.Writer
	if cfg.Verbose {
		echo = cfg.LogOut
	}
	dir, err := os.MkdirTemp("", "aggbench-")
	if err != nil {
		return fmt.Errorf("cannot create a temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	rep := newReport(cfg)
	end := time.Now().UTC().Truncate(time.Minute).Add(-time.Minute)
	gen := harness.SpreadConfig{
		Seed: cfg.Seed, Events: cfg.Events, Start: end.AddDate(0, 0, -cfg.Days), Days: cfg.Days,
		Visitors: cfg.Visitors, Pages: cfg.Pages, ClickShare: cfg.ClickShare, Node: "aggbench-edge", Region: "local",
	}
	rep.Config.Start = gen.Start
	fmt.Fprintf(out, "aggbench: %d events over %d days (%s to %s), %d sites, %d links, %d visitors; servers on CPU %s, generator on CPU %s; load average %s\n",
		cfg.Events, cfg.Days, gen.Start.Format(time.DateTime), end.Format(time.DateTime), cfg.Sites, cfg.Links, cfg.Visitors,
		cpuLabel(cfg.ServerCPU), cpuLabel(cfg.LoadCPU), rep.LoadAverageStart)

	var node *harness.AggregatorNode
	if cfg.has(sinkNode) {
		bin, err := harness.ResolveWaymark(cfg.Waymark)
		if err != nil {
			return err
		}
		// Capture off: the node's own clicks (of the redirect check) must
		// not join the stream or cost it anything.
		node, err = harness.StartAggregatorNode(ctx, harness.NodeConfig{
			Binary: bin, DataDir: filepath.Join(dir, "node"), ExtraArgs: append([]string{"--capture-clicks=false"}, cfg.NodeArgs...), Echo: echo,
			StartTimeout: cfg.StartTimeout, CPUs: cfg.ServerCPU,
		})
		if err != nil {
			return err
		}
		defer node.Stop()
		fmt.Fprintf(out, "node ready at %s (pid %d)\n", node.HTTPAddr, node.Pid())
		if gen.Sites, gen.Links, err = makeEntities(ctx, cfg, node, out); err != nil {
			return err
		}
	} else {
		for i := range cfg.Sites {
			gen.Sites = append(gen.Sites, fmt.Sprintf("site%04d", i))
		}
		for i := range cfg.Links {
			gen.Links = append(gen.Links, fmt.Sprintf("c%06d", i))
		}
	}
	src, err := harness.NewSpreadGen(gen)
	if err != nil {
		return err
	}
	rep.Generated, rep.Clicks = src.Total(), src.Clicks()
	fmt.Fprintf(out, "generated stream: %d events, %d of them clicks\n", rep.Generated, rep.Clicks)

	for _, sink := range cfg.Sinks {
		src, _ := harness.NewSpreadGen(gen) // a fresh copy of the same stream
		var res *SinkResult
		switch sink {
		case sinkNode:
			res, err = ingestNode(ctx, cfg, node, src, rep.Generated, out)
			node.Stop() // its compactions must not run beside the next sink
		case sinkClickHouse:
			res, err = ingestClickHouse(ctx, cfg, filepath.Join(dir, "clickhouse"), echo, src, rep.Generated, out)
		case sinkNodeClickHouse, sinkNodeClickHouse2:
			res, err = ingestNodeClickHouse(ctx, cfg, sink, filepath.Join(dir, sink), echo, src, rep.Generated, out)
		}
		if err != nil {
			return err
		}
		rep.Sinks = append(rep.Sinks, *res)
	}
	rep.finish()
	rep.print(out)
	if cfg.Out != "" {
		if err := harness.WriteJSON(cfg.Out, rep); err != nil {
			return err
		}
		fmt.Fprintf(out, "results written to %s\n", cfg.Out)
	}
	for _, s := range rep.Sinks {
		if !s.CountOK {
			return fmt.Errorf("%s holds %d events; want %d", s.Target, s.Counted, rep.Generated)
		}
	}
	return nil
}

// makeEntities registers the sites and creates the links the events
// belong to, so the node's aggregator sees real ones.
func makeEntities(ctx context.Context, cfg config, node *harness.AggregatorNode, out io.Writer) (sites, links []string, err error) {
	domains := make([]string, cfg.Sites)
	for i := range domains {
		domains[i] = fmt.Sprintf("site-%d.example", i+1)
	}
	if sites, err = harness.RegisterSites(ctx, node.API, domains); err != nil {
		return nil, nil, err
	}
	if cfg.Links > 0 {
		if links, err = harness.LoadNodeLinks(ctx, node.Node, cfg.Links, 32, out); err != nil {
			return nil, nil, err
		}
	}
	fmt.Fprintf(out, "registered %d sites and %d links\n", len(sites), len(links))
	return sites, links, nil
}

// ingestNode ships the stream to the node and checks it holds every
// event, by the admin API's count.
func ingestNode(ctx context.Context, cfg config, node *harness.AggregatorNode, src harness.EventSource, total int, out io.Writer) (*SinkResult, error) {
	res := &SinkResult{Target: sinkNode, Version: "waymark " + harness.DescribeBinary(node.Binary), Pid: node.Pid()}
	before, err := harness.ScrapeMetrics(ctx, node.API.HTTP, node.BaseURL)
	if err != nil {
		return nil, err
	}
	baseCount, err := node.Admin.EventsCount(ctx, "", "")
	if err != nil {
		return nil, err
	}
	shipper, err := harness.NewSegmentShipper(node.PeerURL, node.Token, "aggbench-edge")
	if err != nil {
		return nil, err
	}
	shipper.HTTP = node.Peer
	defer shipper.Close()
	fmt.Fprintf(out, "node: shipping %d events, %d per segment, %d segments per batch\n", total, cfg.SegmentEvents, cfg.SegmentsPerBatch)
	cpu0, _ := harness.GroupCPU(node.Pid())
	st, err := harness.ShipEvents(ctx, shipper, src, cfg.SegmentEvents, cfg.SegmentsPerBatch, total, out)
	if err != nil {
		return nil, fmt.Errorf("cannot ship to the node: %w", err)
	}
	// The node acknowledges a batch once its raw events are stored; its
	// rollups are written at the next checkpoint, which a read brings on
	// at once. The time to the read's answer is part of the run.
	flushStart := time.Now()
	if _, err := node.Admin.EventsCount(ctx, "", ""); err != nil {
		return nil, err
	}
	st.Elapsed += time.Since(flushStart)
	cpu1, _ := harness.GroupCPU(node.Pid())
	res.fill(st, cpu1-cpu0)
	res.PeakRSSBytes, _ = harness.PeakRSS(node.Pid())
	after, err := harness.ScrapeMetrics(ctx, node.API.HTTP, node.BaseURL)
	if err != nil {
		return nil, err
	}
	delta := func(name string) uint64 { return uint64(after.Sum(name) - before.Sum(name)) }
	res.Stored, res.Late, res.Deduplicated, res.Dropped = delta(metricStored), delta(metricLate), delta(metricDedup), delta(metricDropped)
	n, err := node.Admin.EventsCount(ctx, "", "")
	if err != nil {
		return nil, err
	}
	res.Counted = n - baseCount
	res.CountOK = res.Counted == uint64(total)
	res.DiskBytes = harness.DirSize(filepath.Join(node.DataDir, "aggregator"))
	return res, nil
}

// ingestClickHouse starts clickhouse-server, creates the events table,
// inserts the stream, checks the count, and stops the server.
func ingestClickHouse(ctx context.Context, cfg config, dir string, echo io.Writer, src harness.EventSource, total int, out io.Writer) (*SinkResult, error) {
	ch, err := harness.StartClickHouse(ctx, harness.ClickHouseOptions{
		Binary: cfg.ClickHouseBinary, Dir: dir, CPUs: cfg.ServerCPU, Echo: echo, StartTimeout: cfg.StartTimeout,
	})
	if err != nil {
		return nil, err
	}
	defer ch.Stop()
	fmt.Fprintf(out, "clickhouse %s ready at %s (pid %d)\n", ch.Version, ch.HTTPAddr, ch.Pid())
	if err := ch.Exec(ctx, harness.EventsTableDDL(eventsTable)); err != nil {
		return nil, fmt.Errorf("cannot create the events table: %w", err)
	}
	res := &SinkResult{Target: sinkClickHouse, Version: "ClickHouse " + ch.Version, Pid: ch.Pid()}
	fmt.Fprintf(out, "clickhouse: inserting %d events, %d rows per INSERT (TabSeparated)\n", total, cfg.CHBatch)
	cpu0, _ := harness.GroupCPU(ch.Pid())
	st, err := harness.InsertEvents(ctx, ch, eventsTable, src, cfg.CHBatch, total, out)
	if err != nil {
		return nil, fmt.Errorf("cannot insert into clickhouse: %w", err)
	}
	cpu1, _ := harness.GroupCPU(ch.Pid())
	res.fill(st, cpu1-cpu0)
	res.PeakRSSBytes, _ = harness.PeakRSS(ch.Pid())
	got, err := ch.Query(ctx, "SELECT count() FROM "+eventsTable)
	if err != nil {
		return nil, err
	}
	if _, err := fmt.Sscan(strings.TrimSpace(got), &res.Counted); err != nil {
		return nil, fmt.Errorf("cannot read the count %q: %w", got, err)
	}
	res.CountOK = res.Counted == uint64(total)
	res.DiskBytes = harness.DirSize(filepath.Join(dir, "data"))
	return res, nil
}

func cpuLabel(cpus string) string {
	if cpus == "" {
		return "unpinned"
	}
	return cpus
}
