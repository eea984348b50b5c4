package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/waymark/waymark/bench/harness"
	"github.com/waymark/waymark/ingest"
)

func TestParseFlagsRejects(t *testing.T) {
	for _, args := range [][]string{
		{"-scale", "0"}, {"-days", "0"}, {"-reps", "49"}, {"-pages", "0"}, {"-ch-batch", "0"},
		{"-server-cpu", "1", "-load-cpu", "1"}, {"stray"},
		{"-backends", "pebble,pebble"}, {"-backends", "duckdb"}, {"-backends", ""}, {"-load-timeout", "0"}, {"-count-timeout", "0"},
		{"-query-timeout", "0"}, {"-reps-budget", "-1s"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) succeeded; want an error", args)
		}
	}
}

func TestParseFlagsBackends(t *testing.T) {
	cfg, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Backends, []string{backendPebble}) || !cfg.WithClickHouse || !cfg.needsClickHouse() {
		t.Errorf("default backends %q, SQL %v; want the embedded store and ClickHouse's SQL", cfg.Backends, cfg.WithClickHouse)
	}
	cfg, err = parseFlags([]string{"-backends", "clickhouse,pebble", "-with-clickhouse=false"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Backends, []string{backendClickHouse, backendPebble}) || !cfg.needsClickHouse() {
		t.Errorf("backends %q, needs ClickHouse %v; want both in the order given, and a ClickHouse behind the node", cfg.Backends, cfg.needsClickHouse())
	}
	cfg, err = parseFlags([]string{"-with-clickhouse=false"}, io.Discard)
	if err != nil || cfg.needsClickHouse() {
		t.Errorf("the embedded store alone needs ClickHouse: %v (%v); want not", cfg.needsClickHouse(), err)
	}
}

// TestCheckDiskRefusesWhatDoesNotFit asks for the room of more events
// than any disk holds.
func TestCheckDiskRefusesWhatDoesNotFit(t *testing.T) {
	cfg, err := parseFlags([]string{"-backends", "pebble,clickhouse"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	d, err := checkDisk(t.TempDir(), cfg, 1000)
	if err != nil || d.NeedBytes != 1000*(diskPerEventPebble+diskPerEventClickHouse+diskPerEventRawTable) || d.FreeBytes == 0 {
		t.Errorf("1000 events: %v, %v; want room, need 500,000 bytes", d, err)
	}
	if _, err := checkDisk(t.TempDir(), cfg, 1<<50); err == nil {
		t.Errorf("2^50 events fit; want an error")
	}
}

func TestQuantileNearestRank(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	// Nearest rank: p50 of 1..100 is the 50th, p99 the 99th, p100 the last.
	if quantile(d, 0.5) != 50 || quantile(d, 0.99) != 99 || quantile(d, 1) != 100 {
		t.Errorf("quantiles %v %v %v; want 50, 99, 100", quantile(d, 0.5), quantile(d, 0.99), quantile(d, 1))
	}
	if quantile(d[:50], 0.99) != 50 {
		t.Errorf("p99 of 50 values = %v; want the largest", quantile(d[:50], 0.99))
	}
}

func TestTruthAndChecks(t *testing.T) {
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	tr := newTruth(start, 2)
	gen, err := harness.NewHotGen(harness.HotConfig{Seed: 1, Start: start, Days: 2, Code: "c", SiteID: "s", ClicksPerDay: 300, PageviewsPerDay: 200, Pages: 20})
	if err != nil {
		t.Fatal(err)
	}
	src := &tallySource{src: gen, t: tr}
	n := 0
	var ev ingest.Event
	for src.Next(&ev) {
		n++
	}
	if n != 1000 || tr.clicks[0] != 300 || tr.clicks[1] != 300 || tr.pageviews[1] != 200 {
		t.Fatalf("tallied %d events, clicks %v, pageviews %v; want 1000, [300 300], [200 200]", n, tr.clicks, tr.pageviews)
	}
	if tr.linkVisitors[0] == 0 || tr.linkVisitors[0] > 300 {
		t.Errorf("day 0 link visitors %d; want 1 to 300", tr.linkVisitors[0])
	}
	// A ClickHouse answer with one day right and one wrong, by hand.
	body := "2026-11-01\t300\t" + strconv.Itoa(tr.linkVisitors[0]) + "\n2026-11-02\t299\t5\n"
	c, err := checkCHSeries(body, tr, tr.clicks, tr.linkVisitors)
	if err != nil || c.Matched != 1 || c.Of != 2 || c.MaxVisitorError != 0 {
		t.Errorf("checkCHSeries = %+v, %v; want 1 of 2 matched, no visitor error", c, err)
	}
	// A node answer: one day right with a 10 % visitor error.
	node := `{"series":[{"t":"2026-11-01T00:00:00Z","clicks":300,"unique_visitors":` + strconv.Itoa(tr.linkVisitors[0]*11/10) + `},{"t":"2026-11-02T00:00:00Z","clicks":1}]}`
	c, err = checkNodeLinkSeries([]byte(node), tr)
	if err != nil || c.Matched != 1 || c.MaxVisitorError < 0.09 || c.MaxVisitorError > 0.11 {
		t.Errorf("checkNodeLinkSeries = %+v, %v; want 1 matched with a 10%% visitor error", c, err)
	}
}

// TestRunOneDay runs the whole benchmark on one day of data (inside the
// embedded store's late window, so its answers must be exact) against the
// real binary and a real ClickHouse: a node with each analytics store and
// ClickHouse's own SQL, every answer checked against the generated truth.
func TestRunOneDay(t *testing.T) {
	bin := harness.BuildWaymark(t)
	if _, err := harness.FindClickHouse(""); err != nil {
		t.Fatal(err)
	}
	args := []string{"-waymark", bin, "-backends", "pebble,clickhouse", "-scale", "0.002", "-days", "1", "-reps", "50", "-pages", "100", "-segment-events", "500"}
	var rep Report
	harness.RunCommand(t, args, 3*time.Minute, parseFlags, run, &rep)
	names := []string{"node pebble", "node clickhouse", "clickhouse SQL"}
	if len(rep.Queries) != 4 || len(rep.Servers) != 3 {
		t.Fatalf("%d queries, %d servers; want 4 and 3", len(rep.Queries), len(rep.Servers))
	}
	// 2,000 clicks and 2,000 pageviews a day at this scale, one day.
	for i, s := range rep.Servers {
		if s.Name != names[i] || s.Load.Events != 4000 || s.Load.EventsPerSecond <= 0 || s.Late != 0 {
			t.Errorf("server %d: %s loaded %d events at %.0f/s, %d late; want %s, 4000, a rate, 0 late", i, s.Name, s.Load.Events, s.Load.EventsPerSecond, s.Late, names[i])
		}
	}
	for _, q := range rep.Queries {
		if len(q.Sides) != 3 {
			t.Fatalf("%s: %d sides; want 3", q.Name, len(q.Sides))
		}
		for _, s := range q.Sides {
			if !s.Check.OK() {
				t.Errorf("%s on %s: %s; want exact", q.Name, s.Server, s.Check)
			}
			if s.P50Micros <= 0 || s.P99Micros < s.P50Micros || s.MaxMicros < s.P99Micros || s.P99Ratio <= 0 {
				t.Errorf("%s on %s: p50 %v p99 %v max %v, ratio %v; want positive, ordered", q.Name, s.Server, s.P50Micros, s.P99Micros, s.MaxMicros, s.P99Ratio)
			}
		}
		if first := q.Sides[0]; first.P50Ratio != 1 || first.P99Ratio != 1 {
			t.Errorf("%s: the first server's ratios %v, %v; want 1 (it is the baseline)", q.Name, first.P50Ratio, first.P99Ratio)
		}
	}
	// HLL on the embedded node, uniq in ClickHouse (behind a node or not):
	// all within a few percent here.
	for _, name := range names {
		if s, ok := rep.Queries[0].side(name); !ok || s.Check.MaxVisitorError > 0.05 {
			t.Errorf("%s: visitor estimate off by %.1f%% (found %v); want within 5%%", name, 100*s.Check.MaxVisitorError, ok)
		}
	}
	if len(rep.Core.Processes) != 3 {
		t.Errorf("core use of %d processes; want both nodes and ClickHouse", len(rep.Core.Processes))
	}
	for _, p := range rep.Core.Processes {
		if !harness.ProcessGone(p.Pid) {
			t.Errorf("%s: process %d still exists after the run", p.Name, p.Pid)
		}
	}
}

// TestIsTimeout tells a query that outlived the client's deadline (a real
// server on loopback that never answers) from a cancelled run and from
// other errors.
func TestIsTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	client := &http.Client{Timeout: 50 * time.Millisecond}
	_, err = client.Get("http://" + ln.Addr().String() + "/")
	if err == nil {
		t.Fatal("a server that never answers answered")
	}
	ctx := context.Background()
	if !isTimeout(ctx, err) {
		t.Errorf("isTimeout(%v) = false; want true", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if isTimeout(cancelled, err) {
		t.Errorf("isTimeout in a cancelled run = true; want false (the run is stopping)")
	}
	if isTimeout(ctx, errors.New("the node answered 500")) || isTimeout(ctx, nil) {
		t.Errorf("isTimeout of a plain error or nil = true; want false")
	}
}

// TestRunStopsAtTheBudget runs the embedded node alone with a budget
// that one repetition spends: the run stops after it and says so.
func TestRunStopsAtTheBudget(t *testing.T) {
	bin := harness.BuildWaymark(t)
	args := []string{"-waymark", bin, "-with-clickhouse=false", "-scale", "0.001", "-days", "1", "-reps", "50", "-reps-budget", "1ns", "-pages", "50", "-segment-events", "500"}
	var rep Report
	out := harness.RunCommand(t, args, 2*time.Minute, parseFlags, run, &rep)
	if rep.Reps != 50 || rep.RepsDone != 1 || len(rep.Servers) != 1 || len(rep.Queries) != 4 {
		t.Fatalf("reps %d done %d, %d servers, %d queries; want 50, 1, 1, 4", rep.Reps, rep.RepsDone, len(rep.Servers), len(rep.Queries))
	}
	for _, q := range rep.Queries {
		if s := q.Sides[0]; s.Answered != 1 || s.Skipped != "" || !s.Check.OK() {
			t.Errorf("%s: %d answered, skipped %q, %s; want 1, none, exact", q.Name, s.Answered, s.Skipped, s.Check)
		}
	}
	if !strings.Contains(out, "only 1 of the 50 repetitions ran") {
		t.Errorf("the output does not say the budget cut the run:\n%s", out)
	}
}

// TestRefusal tells the ClickHouse backend's refusal of a site question
// (the answer a ClickHouse-backed node gave over 15M pageviews, copied
// from a run) from other 400s and from other statuses.
func TestRefusal(t *testing.T) {
	refused := `{"type":"/problems/invalid-request","title":"Invalid request","status":400,"detail":"unsupported query: too many raw events: more than 5000000 in the range","instance":"/v1/sites/9906573cbdf4/stats/timeseries"}`
	if d, ok := refusal(400, []byte(refused)); !ok || d != "unsupported query: too many raw events: more than 5000000 in the range" {
		t.Errorf("refusal(400, the backend's answer) = %q, %v; want its detail, true", d, ok)
	}
	for _, c := range []struct {
		status int
		body   string
	}{
		{500, refused},
		{400, `{"type":"/problems/invalid-request","status":400,"detail":"from must be YYYY-MM-DD"}`},
		{400, "not json"},
	} {
		if _, ok := refusal(c.status, []byte(c.body)); ok {
			t.Errorf("refusal(%d, %s) = true; want false (the run must fail)", c.status, c.body)
		}
	}
}
