package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
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

// server is one thing the queries are asked of: a node (one analytics
// store) or ClickHouse's own SQL over the raw table.
type server struct {
	name    string
	backend string                  // a node's store; "" for ClickHouse's SQL
	node    *harness.AggregatorNode // nil for ClickHouse's SQL
	hot     harness.HotConfig       // its copy of the stream (its link and site)
	truth   *truth
	qs      []query
	info    ServerInfo
}

func nodeName(backend string) string { return "node " + backend }

const sqlName = "clickhouse SQL"

func run(ctx context.Context, cfg config, out io.Writer) error {
	var echo io.Writer
	if cfg.Verbose {
		echo = cfg.LogOut
	}
	bin, err := harness.ResolveWaymark(cfg.Waymark)
	if err != nil {
		return err
	}
	if cfg.needsClickHouse() {
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
	total := (hot.ClicksPerDay + hot.PageviewsPerDay) * cfg.Days
	fmt.Fprintf(out, "querybench: a link with %d clicks a day and a site with %d pageviews a day, %s to %s (%d events for each server); stores %v, ClickHouse SQL %v; servers on CPU %s, client on CPU %s; load average %s\n",
		hot.ClicksPerDay, hot.PageviewsPerDay, rep.From, rep.To, total, cfg.Backends, cfg.WithClickHouse, cpuLabel(cfg.ServerCPU), cpuLabel(cfg.LoadCPU), rep.LoadAverageStart)
	if rep.Disk, err = checkDisk(dir, cfg, total); err != nil {
		return err
	}
	fmt.Fprintln(out, rep.Disk)

	var ch *harness.ClickHouse
	if cfg.needsClickHouse() {
		ch, err = harness.StartClickHouse(ctx, harness.ClickHouseOptions{
			Binary: cfg.ClickHouseBinary, Dir: filepath.Join(dir, "clickhouse"), CPUs: cfg.ServerCPU, Echo: echo, StartTimeout: cfg.StartTimeout,
		})
		if err != nil {
			return err
		}
		defer ch.Stop()
		rep.ClickHouseVersion, rep.ClickHousePid = "ClickHouse "+ch.Version, ch.Pid()
		fmt.Fprintf(out, "clickhouse %s ready at %s (pid %d)\n", ch.Version, ch.HTTPAddr, ch.Pid())
	}

	var servers []*server
	for _, b := range cfg.Backends {
		s, err := startNode(ctx, cfg, b, bin, filepath.Join(dir, "node-"+b), ch, echo, hot, out)
		if s != nil {
			defer s.node.Stop()
		}
		if err != nil {
			return err
		}
		servers = append(servers, s)
	}
	if cfg.WithClickHouse {
		if err := ch.Exec(ctx, harness.EventsTableDDL(eventsTable)); err != nil {
			return fmt.Errorf("cannot create the events table: %w", err)
		}
		// The first node's stream, so its truth holds for both.
		servers = append(servers, &server{name: sqlName, hot: servers[0].hot,
			info: ServerInfo{Name: sqlName, Version: "ClickHouse " + ch.Version, Pid: ch.Pid(), CPUs: cpuLabel(cfg.ServerCPU)}})
	}

	lctx, cancel := context.WithTimeout(ctx, cfg.LoadTimeout)
	err = load(lctx, cfg, servers, ch, out)
	cancel()
	if err != nil {
		return fmt.Errorf("cannot load the servers (-load-timeout %v): %w", cfg.LoadTimeout, err)
	}
	for _, s := range servers {
		if s.backend != backendClickHouse {
			continue
		}
		took, err := waitMaterialized(ctx, s, cfg.LoadTimeout, out)
		if errors.Is(err, errMaterializerStuck) {
			fmt.Fprintf(out, "%s: %v; timing it as it is\n", s.name, err)
			s.info.MaterializeStuck = err.Error()
		} else if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: closed hours materialized %.1f s after the load\n", s.name, took.Seconds())
		s.info.MaterializeSeconds = took.Seconds()
	}
	for _, s := range servers {
		if s.node != nil {
			s.info.DiskBytes = harness.DirSize(s.node.DataDir)
		} else {
			s.info.DiskBytes = harness.DirSize(filepath.Join(ch.Dir, "data"))
		}
	}
	groups := []int{}
	for _, s := range servers {
		if s.node != nil {
			groups = append(groups, s.node.Pid())
		}
	}
	if ch != nil {
		groups = append(groups, ch.Pid())
	}
	waited, idle, err := harness.WaitIdle(ctx, harness.IdleConfig{Groups: groups, Timeout: cfg.IdleTimeout})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "servers idle after %.1f s (idle: %v)\n", waited.Seconds(), idle)
	rep.IdleWaitSeconds, rep.StartedIdle = waited.Seconds(), idle

	for _, s := range servers {
		s.qs = buildQueries(s.hot.Code, s.hot.SiteID, from, to)
		rep.Servers = append(rep.Servers, s.info)
	}
	results, err := runQueries(ctx, cfg, servers, ch, rep, out)
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

// startNode starts a dev node with the given analytics store (capture
// off: its own clicks must not join the data) and creates its hot link
// and site. A node returned with an error is still running.
func startNode(ctx context.Context, cfg config, backend, bin, dataDir string, ch *harness.ClickHouse, echo io.Writer, hot harness.HotConfig, out io.Writer) (*server, error) {
	args := []string{"--capture-clicks=false"}
	if backend == backendClickHouse {
		args = append(args, harness.ClickHouseStoreArgs(ch, harness.ClickHouseDatabase)...)
	}
	node, err := harness.StartAggregatorNode(ctx, harness.NodeConfig{
		Binary: bin, DataDir: dataDir, ExtraArgs: append(args, cfg.NodeArgs...),
		Env: cfg.NodeEnv, Echo: echo, StartTimeout: cfg.StartTimeout, CPUs: cfg.ServerCPU, Name: nodeName(backend),
	})
	if err != nil {
		return nil, err
	}
	s := &server{name: nodeName(backend), backend: backend, node: node,
		info: ServerInfo{Name: nodeName(backend), Version: "waymark " + harness.DescribeBinary(bin), Pid: node.Pid(), CPUs: cpuLabel(cfg.ServerCPU)}}
	codes, err := harness.LoadNodeLinks(ctx, node.Node, 1, 1, nil)
	if err != nil {
		return s, err
	}
	sites, err := harness.RegisterSites(ctx, node.API, []string{hotDomain})
	if err != nil {
		return s, err
	}
	s.hot = hot
	s.hot.Code, s.hot.SiteID = codes[0], sites[0]
	fmt.Fprintf(out, "%s ready at %s (pid %d): link %s, site %s (%s)\n", s.name, node.HTTPAddr, node.Pid(), s.hot.Code, s.hot.SiteID, hotDomain)
	return s, nil
}

// load ships each node its copy of the stream, tallying the truth as it
// goes, and checks it holds all of it (the embedded store by the admin
// API's count, a ClickHouse-backed node by ClickHouse's count FINAL);
// then inserts the first node's stream into ClickHouse's raw table.
func load(ctx context.Context, cfg config, servers []*server, ch *harness.ClickHouse, out io.Writer) error {
	for _, s := range servers {
		gen, err := harness.NewHotGen(s.hot)
		if err != nil {
			return err
		}
		total := gen.Total()
		if s.node == nil {
			s.truth = servers[0].truth
			fmt.Fprintf(out, "%s: inserting %d events\n", s.name, total)
			st, err := harness.InsertEvents(ctx, ch, eventsTable, gen, cfg.CHBatch, total, out)
			if err != nil {
				return fmt.Errorf("cannot insert into clickhouse: %w", err)
			}
			s.info.Load = loadFigures(st)
			got, err := ch.Query(ctx, "SELECT count() FROM "+eventsTable)
			if err != nil {
				return err
			}
			if want := fmt.Sprintf("%d\n", total); got != want {
				return fmt.Errorf("clickhouse holds %q events; want %d", got, total)
			}
			continue
		}
		s.truth = newTruth(s.hot.Start, s.hot.Days)
		shipper, err := harness.NewSegmentShipper(s.node.PeerURL, s.node.Token, "querybench-edge")
		if err != nil {
			return err
		}
		shipper.HTTP = s.node.Peer
		before, err := harness.ScrapeMetrics(ctx, s.node.API.HTTP, s.node.BaseURL)
		if err != nil {
			shipper.Close()
			return err
		}
		fmt.Fprintf(out, "%s: shipping %d events\n", s.name, total)
		st, err := harness.ShipEvents(ctx, shipper, &tallySource{src: gen, t: s.truth}, cfg.SegmentEvents, cfg.SegmentsPerBatch, total, out)
		shipper.Close()
		if err != nil {
			return fmt.Errorf("cannot ship to the %s: %w", s.name, err)
		}
		if s.backend == backendClickHouse {
			acked := time.Now()
			seen, _, err := harness.WaitClickHouseEvents(ctx, ch, harness.ClickHouseDatabase, uint64(total), cfg.CountTimeout)
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			st.Elapsed += seen.Sub(acked)
			s.info.Load = loadFigures(st)
			continue
		}
		after, err := harness.ScrapeMetrics(ctx, s.node.API.HTTP, s.node.BaseURL)
		if err != nil {
			return err
		}
		s.info.Load = loadFigures(st)
		s.info.Late = uint64(after.Sum("waymark_rollup_events_late_total") - before.Sum("waymark_rollup_events_late_total"))
		n, err := s.node.Admin.EventsCount(ctx, "", "")
		if err != nil {
			return err
		}
		if n != uint64(total) {
			return fmt.Errorf("the %s holds %d events; want %d", s.name, n, total)
		}
	}
	return nil
}

// runQueries asks each query once of each server, unmeasured, to check
// the answers (and warm them up), then cfg.Reps timed times, the servers
// in an order that rotates from one repetition to the next.
func runQueries(ctx context.Context, cfg config, servers []*server, ch *harness.ClickHouse, rep *Report, out io.Writer) ([]QueryResult, error) {
	client := &http.Client{Timeout: cfg.QueryTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 2}}
	defer client.CloseIdleConnections()
	askNode := func(node *harness.AggregatorNode, q query) ([]byte, time.Duration, error) {
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
			if detail, ok := refusal(resp.StatusCode, b); ok {
				return nil, took, &refusedError{detail: detail}
			}
			return nil, 0, fmt.Errorf("the node answered %s with %s: %.300s", q.Name, resp.Status, b)
		}
		return b, took, nil
	}
	// ask asks server s query i and checks the answer when check is set.
	ask := func(s *server, i int, check bool) (Check, time.Duration, error) {
		q := s.qs[i]
		if s.node != nil {
			b, d, err := askNode(s.node, q)
			if err != nil || !check {
				return Check{}, d, err
			}
			c, err := q.checkNode(b, s.truth)
			return c, d, err
		}
		qctx, cancel := context.WithTimeout(ctx, cfg.QueryTimeout)
		defer cancel()
		t0 := time.Now()
		body, err := ch.Query(qctx, q.SQL)
		d := time.Since(t0)
		if err != nil || !check {
			return Check{}, d, err
		}
		c, err := q.checkCH(body, s.truth)
		return c, d, err
	}

	nq := len(servers[0].qs)
	results := make([]QueryResult, nq)
	for i := range results {
		r := &results[i]
		r.Name = servers[0].qs[i].Name
		line := r.Name + ":"
		for _, s := range servers {
			side := SideResult{Server: s.name, Path: s.qs[i].NodePath, SQL: s.qs[i].SQL}
			c, d, err := ask(s, i, true)
			var refused *refusedError
			switch {
			case errors.As(err, &refused):
				side.Skipped = fmt.Sprintf("refused (400 after %v): %s", d.Round(time.Millisecond), refused.detail)
				line += fmt.Sprintf(" %s %s;", s.name, side.Skipped)
			case isTimeout(ctx, err):
				side.Skipped = fmt.Sprintf("no answer within %v", cfg.QueryTimeout)
				line += fmt.Sprintf(" %s %s;", s.name, side.Skipped)
			case err != nil:
				return nil, err
			default:
				side.Check, side.FirstMicros = c, harness.Micros(d)
				line += fmt.Sprintf(" %s %s in %v;", s.name, c, d.Round(time.Millisecond))
			}
			r.Sides = append(r.Sides, side)
		}
		fmt.Fprintln(out, line)
	}
	var prof *profileCapture
	if cfg.Profile != "" {
		prof = startProfile(ctx, servers[0].node, cfg.ProfileSeconds, cfg.Profile)
	}
	meter := startCoreMeter(cfg.ServerCPU, rep.Servers, ch)
	started := time.Now()
	for rp := range cfg.Reps {
		if tenth := rp * 10 / cfg.Reps; rp > 0 && tenth > (rp-1)*10/cfg.Reps {
			fmt.Fprintf(out, "  %d/%d repetitions in %v\n", rp, cfg.Reps, time.Since(started).Round(time.Second))
		}
		for i := range results {
			for k := range servers {
				j := (k + rp) % len(servers)
				side := &results[i].Sides[j]
				if side.Skipped != "" {
					continue
				}
				_, d, err := ask(servers[j], i, false)
				var refused *refusedError
				switch {
				case errors.As(err, &refused):
					side.Skipped = fmt.Sprintf("refused at repetition %d: %s", rp+1, refused.detail)
					fmt.Fprintf(out, "  %s: %s %s; not asked again\n", results[i].Name, side.Server, side.Skipped)
					continue
				case isTimeout(ctx, err):
					side.Skipped = fmt.Sprintf("no answer within %v at repetition %d", cfg.QueryTimeout, rp+1)
					fmt.Fprintf(out, "  %s: %s %s; not asked again\n", results[i].Name, side.Server, side.Skipped)
					continue
				case err != nil:
					return nil, err
				}
				side.took = append(side.took, d)
			}
		}
		rep.RepsDone = rp + 1
		if cfg.RepsBudget > 0 && time.Since(started) > cfg.RepsBudget && rp+1 < cfg.Reps {
			fmt.Fprintf(out, "  -reps-budget %v spent after %d repetitions; stopping there\n", cfg.RepsBudget, rp+1)
			break
		}
	}
	requests := map[string]int{}
	for _, r := range results {
		for _, sd := range r.Sides {
			requests[sd.Server] += len(sd.took)
		}
	}
	use, err := meter.finish(requests)
	if err != nil {
		return nil, err
	}
	rep.Core = use
	if prof != nil {
		// Keep the node answering until the capture ends, so that the
		// whole profile is of queries.
		for i := 0; !prof.done(); i++ {
			if _, _, err := askNode(servers[0].node, servers[0].qs[i%nq]); err != nil {
				return nil, err
			}
		}
		if err := prof.wait(); err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "%s CPU profile of the queries written to %s\n", servers[0].name, cfg.Profile)
	}
	return results, nil
}

func cpuLabel(cpus string) string {
	if cpus == "" {
		return "unpinned"
	}
	return cpus
}

// isTimeout reports whether err is a query that outlived -query-timeout
// (the client's deadline), not the run being cancelled.
func isTimeout(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// refusedError is a node's answer that it will not answer a question
// (refusal).
type refusedError struct{ detail string }

func (e *refusedError) Error() string { return "refused: " + e.detail }

// refusal reports whether a node's non-200 answer is a refusal of the
// question itself, which the report records, rather than a failure of
// the run: a 400 problem whose detail says the query is unsupported (the
// ClickHouse backend's bound on the raw events one site question reads,
// rollup/clickhouse BackendConfig.MaxEvents). Any other answer, a 400
// for a malformed question included, is the benchmark's bug or the
// node's, and fails the run.
func refusal(status int, body []byte) (string, bool) {
	if status != http.StatusBadRequest {
		return "", false
	}
	var p struct {
		Type   string `json:"type"`
		Detail string `json:"detail"`
	}
	if json.Unmarshal(body, &p) != nil || !strings.HasPrefix(p.Detail, "unsupported query") {
		return "", false
	}
	return p.Detail, true
}
