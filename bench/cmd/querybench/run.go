package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

const (
	eventsTable = "events"
	hotDomain   = "hot.example"
	// Full-scale daily volumes of the two hot entities.
	clicksPerDay    = 1_000_000
	pageviewsPerDay = 1_000_000
)

func run(ctx context.Context, cfg config, out io.Writer) error {
	var echo io.Writer
	if cfg.Verbose {
		echo = cfg.LogOut
	}
	bin, err := harness.ResolveWaymark(cfg.Waymark)
	if err != nil {
		return err
	}
	if cfg.WithClickHouse {
		if _, err := harness.FindClickHouse(cfg.ClickHouseBinary); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp("", "querybench-")
	if err != nil {
		return fmt.Errorf("cannot create a temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	rep := newReport(cfg)
	to := time.Now().UTC().Truncate(24 * time.Hour)
	from := to.AddDate(0, 0, -cfg.Days)
	hot := harness.HotConfig{
		Seed: cfg.Seed, Start: from, Days: cfg.Days,
		ClicksPerDay: harness.ScaledPerDay(clicksPerDay, cfg.Scale), PageviewsPerDay: harness.ScaledPerDay(pageviewsPerDay, cfg.Scale),
		Pages: cfg.Pages, Node: "querybench-edge", Region: "local",
	}
	rep.ClicksPerDay, rep.PageviewsPerDay = hot.ClicksPerDay, hot.PageviewsPerDay
	rep.From, rep.To = from.Format(time.DateOnly), to.AddDate(0, 0, -1).Format(time.DateOnly)
	fmt.Fprintf(out, "querybench: a link with %d clicks a day and a site with %d pageviews a day, %s to %s; servers on CPU %s, client on CPU %s; load average %s\n",
		hot.ClicksPerDay, hot.PageviewsPerDay, rep.From, rep.To, cpuLabel(cfg.ServerCPU), cpuLabel(cfg.LoadCPU), rep.LoadAverageStart)

	node, err := harness.StartAggregatorNode(ctx, harness.NodeConfig{
		Binary: bin, DataDir: filepath.Join(dir, "node"), ExtraArgs: append([]string{"--capture-clicks=false"}, cfg.NodeArgs...),
		Env: cfg.NodeEnv, Echo: echo, StartTimeout: cfg.StartTimeout, CPUs: cfg.ServerCPU,
	})
	if err != nil {
		return err
	}
	defer node.Stop()
	rep.NodeVersion, rep.NodePid = "waymark "+harness.DescribeBinary(bin), node.Pid()
	codes, err := harness.LoadNodeLinks(ctx, node.Node, 1, 1, nil)
	if err != nil {
		return err
	}
	sites, err := harness.RegisterSites(ctx, node.API, []string{hotDomain})
	if err != nil {
		return err
	}
	hot.Code, hot.SiteID = codes[0], sites[0]
	fmt.Fprintf(out, "node ready at %s (pid %d): link %s, site %s (%s)\n", node.HTTPAddr, node.Pid(), hot.Code, hot.SiteID, hotDomain)

	var ch *harness.ClickHouse
	if cfg.WithClickHouse {
		ch, err = harness.StartClickHouse(ctx, harness.ClickHouseOptions{
			Binary: cfg.ClickHouseBinary, Dir: filepath.Join(dir, "clickhouse"), CPUs: cfg.ServerCPU, Echo: echo, StartTimeout: cfg.StartTimeout,
		})
		if err != nil {
			return err
		}
		defer ch.Stop()
		rep.ClickHouseVersion, rep.ClickHousePid = "ClickHouse "+ch.Version, ch.Pid()
		fmt.Fprintf(out, "clickhouse %s ready at %s (pid %d)\n", ch.Version, ch.HTTPAddr, ch.Pid())
		if err := ch.Exec(ctx, harness.EventsTableDDL(eventsTable)); err != nil {
			return fmt.Errorf("cannot create the events table: %w", err)
		}
	}

	tr, err := load(ctx, cfg, hot, node, ch, rep, out)
	if err != nil {
		return err
	}
	groups := []int{node.Pid()}
	if ch != nil {
		groups = append(groups, ch.Pid())
	}
	waited, idle, err := harness.WaitIdle(ctx, harness.IdleConfig{Groups: groups, Timeout: cfg.IdleTimeout})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "servers idle after %.1f s (idle: %v)\n", waited.Seconds(), idle)
	rep.IdleWaitSeconds, rep.StartedIdle = waited.Seconds(), idle

	qs := buildQueries(hot.Code, hot.SiteID, from, to)
	results, err := runQueries(ctx, cfg, node, ch, qs, tr, rep, out)
	if err != nil {
		return err
	}
	rep.Queries = results
	rep.finish()
	rep.print(out)
	if cfg.Out != "" {
		if err := harness.WriteJSON(cfg.Out, rep); err != nil {
			return err
		}
		fmt.Fprintf(out, "results written to %s\n", cfg.Out)
	}
	return nil
}

// load sends the hot entities' events to the node, then the same events
// to ClickHouse, checking both hold all of them; the first pass tallies
// the truth.
func load(ctx context.Context, cfg config, hot harness.HotConfig, node *harness.AggregatorNode, ch *harness.ClickHouse, rep *Report, out io.Writer) (*truth, error) {
	gen, err := harness.NewHotGen(hot)
	if err != nil {
		return nil, err
	}
	total := gen.Total()
	tr := newTruth(hot.Start, hot.Days)
	shipper, err := harness.NewSegmentShipper(node.PeerURL, node.Token, "querybench-edge")
	if err != nil {
		return nil, err
	}
	shipper.HTTP = node.Peer
	defer shipper.Close()
	before, err := harness.ScrapeMetrics(ctx, node.API.HTTP, node.BaseURL)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "node: shipping %d events\n", total)
	st, err := harness.ShipEvents(ctx, shipper, &tallySource{src: gen, t: tr}, cfg.SegmentEvents, cfg.SegmentsPerBatch, total, out)
	if err != nil {
		return nil, fmt.Errorf("cannot ship to the node: %w", err)
	}
	after, err := harness.ScrapeMetrics(ctx, node.API.HTTP, node.BaseURL)
	if err != nil {
		return nil, err
	}
	rep.NodeLoad = loadFigures(st)
	rep.NodeLate = uint64(after.Sum("waymark_rollup_events_late_total") - before.Sum("waymark_rollup_events_late_total"))
	n, err := node.Admin.EventsCount(ctx, "", "")
	if err != nil {
		return nil, err
	}
	if n != uint64(total) {
		return nil, fmt.Errorf("the node holds %d events; want %d", n, total)
	}

	if ch == nil {
		return tr, nil
	}
	gen, _ = harness.NewHotGen(hot) // the same stream again
	fmt.Fprintf(out, "clickhouse: inserting %d events\n", total)
	st, err = harness.InsertEvents(ctx, ch, eventsTable, gen, cfg.CHBatch, total, out)
	if err != nil {
		return nil, fmt.Errorf("cannot insert into clickhouse: %w", err)
	}
	rep.ClickHouseLoad = loadFigures(st)
	got, err := ch.Query(ctx, "SELECT count() FROM "+eventsTable)
	if err != nil {
		return nil, err
	}
	if want := fmt.Sprintf("%d\n", total); got != want {
		return nil, fmt.Errorf("clickhouse holds %q events; want %d", got, total)
	}
	return tr, nil
}

// runQueries asks each query once of each server, unmeasured, to check
// the answers (and warm both up), then cfg.Reps timed times, node and
// ClickHouse in alternating order.
func runQueries(ctx context.Context, cfg config, node *harness.AggregatorNode, ch *harness.ClickHouse, qs []query, tr *truth, rep *Report, out io.Writer) ([]QueryResult, error) {
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 2}}
	defer client.CloseIdleConnections()
	askNode := func(q query) ([]byte, time.Duration, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, node.BaseURL+q.NodePath, nil)
		if err != nil {
			return nil, 0, err
		}
		req.Header.Set("Authorization", "Bearer "+node.APIKey)
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return nil, 0, fmt.Errorf("cannot ask the node %s: %w", q.Name, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		took := time.Since(t0)
		if err != nil {
			return nil, 0, fmt.Errorf("cannot read the node's answer to %s: %w", q.Name, err)
		}
		if resp.StatusCode != http.StatusOK {
			return nil, 0, fmt.Errorf("the node answered %s with %s: %.300s", q.Name, resp.Status, b)
		}
		return b, took, nil
	}
	askCH := func(q query) (string, time.Duration, error) {
		t0 := time.Now()
		body, err := ch.Query(ctx, q.SQL)
		return body, time.Since(t0), err
	}

	results := make([]QueryResult, len(qs))
	for i, q := range qs {
		r := &results[i]
		r.query = q
		b, _, err := askNode(q)
		if err != nil {
			return nil, err
		}
		if r.NodeCheck, err = q.checkNode(b, tr); err != nil {
			return nil, err
		}
		if ch != nil {
			body, _, err := askCH(q)
			if err != nil {
				return nil, err
			}
			if r.ClickHouseCheck, err = q.checkCH(body, tr); err != nil {
				return nil, err
			}
		}
		fmt.Fprintf(out, "%s: node %s; clickhouse %s\n", q.Name, r.NodeCheck, r.ClickHouseCheck)
	}
	var prof *profileCapture
	if cfg.Profile != "" {
		prof = startProfile(ctx, node, cfg.ProfileSeconds, cfg.Profile)
	}
	chPid := 0
	if ch != nil {
		chPid = ch.Pid()
	}
	meter := startCoreMeter(cfg.ServerCPU, node.Pid(), chPid)
	for rep := range cfg.Reps {
		for i, q := range qs {
			r := &results[i]
			err := harness.RunPair(rep, func(side int) error {
				if side == 0 {
					_, d, err := askNode(q)
					r.node = append(r.node, d)
					return err
				}
				if ch == nil {
					return nil
				}
				_, d, err := askCH(q)
				r.ch = append(r.ch, d)
				return err
			})
			if err != nil {
				return nil, err
			}
		}
	}
	use, err := meter.finish(cfg.Reps * len(qs))
	if err != nil {
		return nil, err
	}
	rep.Core = use
	if prof != nil {
		// Keep the node answering until the capture ends, so that the
		// whole profile is of queries.
		for i := 0; !prof.done(); i++ {
			if _, _, err := askNode(qs[i%len(qs)]); err != nil {
				return nil, err
			}
		}
		if err := prof.wait(); err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "node CPU profile of the queries written to %s\n", cfg.Profile)
	}
	return results, nil
}

func cpuLabel(cpus string) string {
	if cpus == "" {
		return "unpinned"
	}
	return cpus
}
