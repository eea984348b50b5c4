package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

// Capture counters of the node's /metrics.
const (
	metricWritten = "waymark_ingest_written_events_total"
	metricShipped = "waymark_ingest_shipped_events_total"
	metricDropped = "waymark_ingest_dropped_total"
	metricQueue   = "waymark_ingest_queue_length"
)

// pollEvery is how often the settle loops look; it is the resolution of
// the settle time.
const pollEvery = 100 * time.Millisecond

// snapshot is the node's capture counters at one moment.
type snapshot struct {
	Written, Shipped, Queue float64
	Dropped                 map[string]float64 // by reason
	Stored                  uint64             // the aggregator's raw event count
}

func (s snapshot) droppedTotal() float64 {
	var n float64
	for _, v := range s.Dropped {
		n += v
	}
	return n
}

type probe struct {
	node   *harness.Node
	admin  *harness.AdminClient
	client *http.Client
}

func (p *probe) take(ctx context.Context) (snapshot, error) {
	m, err := harness.ScrapeMetrics(ctx, p.client, p.node.BaseURL)
	if err != nil {
		return snapshot{}, err
	}
	s := snapshot{Written: m[metricWritten], Shipped: m[metricShipped], Queue: m[metricQueue], Dropped: map[string]float64{}}
	for k, v := range m {
		if reason, ok := strings.CutPrefix(k, metricDropped+`{reason="`); ok {
			s.Dropped[strings.TrimSuffix(reason, `"}`)] = v
		}
	}
	if s.Stored, err = p.admin.EventsCount(ctx, "", ""); err != nil {
		return snapshot{}, err
	}
	return s, nil
}

func run(ctx context.Context, cfg config, out io.Writer) error {
	var echo io.Writer
	if cfg.Verbose {
		echo = cfg.LogOut
	}
	bin, err := harness.ResolveWaymark(cfg.Waymark)
	if err != nil {
		return err
	}
	if cfg.LoadGen == "wrk" {
		if _, err := harness.FindWrk(cfg.WrkBinary); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp("", "capturecheck-")
	if err != nil {
		return fmt.Errorf("cannot create a temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	rep := newReport(cfg)
	fmt.Fprintf(out, "capturecheck: %d links, %d visitors, %d conns, %v of %s load; node on CPU %s, load generator on CPU %s; load average %s\n",
		cfg.Links, cfg.Visitors, cfg.Conns, cfg.Duration, cfg.LoadGen, cpuLabel(cfg.ServerCPU), cpuLabel(cfg.LoadCPU), rep.LoadAverageStart)

	dataDir := filepath.Join(dir, "node")
	args := append(append([]string(nil), harness.NodeWriteRateArgs...), cfg.NodeArgs...)
	node, err := harness.StartDevNode(ctx, harness.NodeConfig{
		Binary: bin, DataDir: dataDir, ExtraArgs: args, Echo: echo, StartTimeout: cfg.StartTimeout, CPUs: cfg.ServerCPU,
	})
	if err != nil {
		return fmt.Errorf("cannot start the node: %w", err)
	}
	defer node.Stop()
	rep.NodePid = node.Pid()
	fmt.Fprintf(out, "node --dev %s ready at %s (pid %d)\n", strings.Join(args, " "), node.HTTPAddr, node.Pid())
	codes, err := harness.LoadNodeLinks(ctx, node, cfg.Links, 32, out)
	if err != nil {
		return err
	}
	admin, err := harness.NewDevAdminClient(dataDir)
	if err != nil {
		return err
	}
	p := &probe{node: node, admin: admin, client: &http.Client{Timeout: 10 * time.Second}}
	api := harness.NewAPIClient(node.BaseURL, node.APIKey)

	visitors, err := harness.MakeVisitors(cfg.Visitors)
	if err != nil {
		return err
	}
	paths := make([][]byte, len(codes))
	for i, c := range codes {
		paths[i] = []byte("/" + c)
	}
	reqFile := filepath.Join(dir, "requests")
	if cfg.LoadGen == "wrk" {
		if err := harness.WrkRequests(reqFile, paths, visitors, max(100_000, 2*cfg.Visitors), cfg.Seed); err != nil {
			return err
		}
	}

	// Start from a settled node: the redirect check's clicks stored.
	before, err := settle(ctx, p, cfg.SettleTimeout, func(s snapshot) bool {
		return s.Queue == 0 && s.Written == s.Shipped && float64(s.Stored) == s.Written
	})
	if err != nil {
		return fmt.Errorf("cannot see the node settle before the load: %w", err)
	}
	statsBefore, droppedBefore, err := statsClicks(ctx, api, codes)
	if err != nil {
		return err
	}

	fmt.Fprintf(out, "load: %v at saturation\n", cfg.Duration)
	answered, err := load(ctx, cfg, rep, node, dir, reqFile, paths, visitors)
	if err != nil {
		return err
	}
	loadEnd := time.Now()
	if harness.IsClosed(node.Exited()) {
		return fmt.Errorf("node died during the load: %s", node.ExitNote())
	}

	// Every click the node took is now written or dropped, once its queue
	// is empty and the counters stop moving.
	var lastTaken float64 = -1
	after, err := settle(ctx, p, time.Minute, func(s snapshot) bool {
		taken := s.Written + s.droppedTotal()
		done := s.Queue == 0 && taken == lastTaken
		lastTaken = taken
		return done
	})
	if err != nil {
		return fmt.Errorf("cannot see the capture queue drain: %w", err)
	}
	rep.account(before, after, answered)

	// Then every written click must reach the aggregator and its stats.
	want := before.Stored + rep.Written
	stored, err := settle(ctx, p, cfg.SettleTimeout, func(s snapshot) bool { return s.Stored >= want })
	rep.SettleSeconds = time.Since(loadEnd).Seconds()
	rep.Stored = stored.Stored - before.Stored
	if err != nil {
		rep.SettleTimedOut = true
		fmt.Fprintf(out, "not every written click counted after %v: %v\n", cfg.SettleTimeout, err)
	}
	// Drop tallies ship with the segment open after the burst: poll until
	// the answers own up to every tallied drop, or give up after 15 s.
	for deadline := time.Now().Add(15 * time.Second); ; {
		statsAfter, droppedAfter, err := statsClicks(ctx, api, codes)
		if err != nil {
			return err
		}
		rep.StatsClicks = statsAfter - statsBefore
		rep.StatsDropped = droppedAfter - droppedBefore
		if rep.StatsDropped >= rep.tallied() || time.Now().After(deadline) {
			break
		}
		time.Sleep(pollEvery)
	}
	rep.finish(cfg)
	rep.print(out)
	if cfg.Out != "" {
		if err := harness.WriteJSON(cfg.Out, rep); err != nil {
			return err
		}
		fmt.Fprintf(out, "results written to %s\n", cfg.Out)
	}
	if rep.Errors > 0 {
		return fmt.Errorf("%d requests failed; the figures are not valid", rep.Errors)
	}
	if cfg.Check && !rep.Pass {
		return fmt.Errorf("%w: %.3f%% dropped, settled in %.1f s", errMissed, 100*rep.DropShare, rep.SettleSeconds)
	}
	return nil
}

// load drives the node at saturation for cfg.Duration and returns the
// redirects it answered with 302 over the whole run.
func load(ctx context.Context, cfg config, rep *Report, node *harness.Node, dir, reqFile string, paths [][]byte, visitors []harness.Visitor) (uint64, error) {
	var cpu [2]time.Duration
	read := func(i int) func() {
		return func() { cpu[i], _ = harness.GroupCPU(node.Pid()) }
	}
	var answered uint64
	var window time.Duration
	if cfg.LoadGen == "wrk" {
		var echo io.Writer
		if cfg.Verbose {
			echo = cfg.LogOut
		}
		res, err := harness.RunWrk(ctx, harness.WrkConfig{
			Binary: cfg.WrkBinary, Dir: dir, Addr: node.HTTPAddr, Requests: reqFile, Conns: cfg.Conns,
			Duration: cfg.Duration, CPUs: cfg.LoadCPU, Echo: echo, AtStart: read(0), AtEnd: read(1),
		})
		if err != nil {
			return 0, err
		}
		rep.RPS, rep.RunFigures, window = res.RPS(), res.Figures(), res.Elapsed()
		// wrk does not count the requests in flight when it stops (at
		// most one per connection); the node may have answered them.
		answered = res.OK()
	} else {
		res, err := harness.RunLoad(ctx, harness.LoadConfig{
			Addr: node.HTTPAddr, Paths: paths, Conns: cfg.Conns, Visitors: visitors, Duration: cfg.Duration, Seed: cfg.Seed,
			AtWindowStart: read(0), AtWindowEnd: read(1),
		})
		if err != nil {
			return 0, err
		}
		rep.RPS = res.RPS()
		rep.RunFigures = harness.NewRunFigures(res.Latency, res.OK, res.Errors(), res.Statuses, res.TransportErrors, res.FirstError)
		window, answered = res.Elapsed, res.TotalOK
	}
	if window > 0 {
		rep.NodeCPUShare = (cpu[1] - cpu[0]).Seconds() / window.Seconds()
	}
	return answered, nil
}

// settle polls the node until done holds, or timeout passes.
func settle(ctx context.Context, p *probe, timeout time.Duration, done func(snapshot) bool) (snapshot, error) {
	deadline := time.Now().Add(timeout)
	for {
		s, err := p.take(ctx)
		if err != nil {
			return s, err
		}
		if done(s) {
			return s, nil
		}
		if time.Now().After(deadline) {
			return s, fmt.Errorf("still not there after %v (written %.0f, shipped %.0f, stored %d, queue %.0f)", timeout, s.Written, s.Shipped, s.Stored, s.Queue)
		}
		select {
		case <-ctx.Done():
			return s, context.Cause(ctx)
		case <-time.After(pollEvery):
		}
	}
}

// linkStats is the part of GET /v1/links/{code}/stats read here.
type linkStats struct {
	Totals struct {
		Clicks    uint64 `json:"clicks"`
		BotClicks uint64 `json:"bot_clicks"`
	} `json:"totals"`
	DroppedEvents uint64 `json:"dropped_events"`
}

// statsClicks adds up what the owner's stats show for every link over the
// default range (the last 7 days up to now), bots included, and the
// clicks they say were dropped.
func statsClicks(ctx context.Context, api *harness.APIClient, codes []string) (clicks, dropped uint64, err error) {
	for _, c := range codes {
		var st linkStats
		if err := api.GetJSON(ctx, "/v1/links/"+c+"/stats", &st); err != nil {
			return 0, 0, err
		}
		clicks += st.Totals.Clicks + st.Totals.BotClicks
		dropped += st.DroppedEvents
	}
	return clicks, dropped, nil
}

func cpuLabel(cpus string) string {
	if cpus == "" {
		return "unpinned"
	}
	return cpus
}
