package main

import (
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/waymark/waymark/bench/harness"
	"github.com/waymark/waymark/ingest"
)

func TestParseFlagsRejects(t *testing.T) {
	for _, args := range [][]string{
		{"-scale", "0"}, {"-days", "0"}, {"-reps", "49"}, {"-pages", "0"}, {"-ch-batch", "0"},
		{"-server-cpu", "1", "-load-cpu", "1"}, {"stray"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) succeeded; want an error", args)
		}
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
// node's late window, so its answers must be exact) against the real
// binary and a real ClickHouse.
func TestRunOneDay(t *testing.T) {
	bin := harness.BuildWaymark(t)
	if _, err := harness.FindClickHouse(""); err != nil {
		t.Fatal(err)
	}
	args := []string{"-waymark", bin, "-scale", "0.002", "-days", "1", "-reps", "50", "-pages", "100", "-segment-events", "500"}
	var rep Report
	harness.RunCommand(t, args, 2*time.Minute, parseFlags, run, &rep)
	if len(rep.Queries) != 4 || rep.NodeLoad.Events != 4000 || rep.NodeLate != 0 {
		t.Fatalf("%d queries, %d events loaded, %d late; want 4, 4000, 0", len(rep.Queries), rep.NodeLoad.Events, rep.NodeLate)
	}
	for _, q := range rep.Queries {
		if !q.NodeCheck.OK() || !q.ClickHouseCheck.OK() {
			t.Errorf("%s: node %s, clickhouse %s; want both exact", q.Name, q.NodeCheck, q.ClickHouseCheck)
		}
		if q.NodeP50Micros <= 0 || q.NodeP99Micros < q.NodeP50Micros || q.ClickHouseP50Micros <= 0 || q.P99Ratio <= 0 {
			t.Errorf("%s: node p50 %v p99 %v, clickhouse p50 %v, ratio %v; want positive, ordered", q.Name, q.NodeP50Micros, q.NodeP99Micros, q.ClickHouseP50Micros, q.P99Ratio)
		}
	}
	// HLL on the node, uniq in ClickHouse: both within a few percent here.
	if e := rep.Queries[0].NodeCheck.MaxVisitorError; e > 0.05 {
		t.Errorf("node visitor estimate off by %.1f%%; want within 5%%", 100*e)
	}
	for _, pid := range []int{rep.NodePid, rep.ClickHousePid} {
		if !harness.ProcessGone(pid) {
			t.Errorf("process %d still exists after the run", pid)
		}
	}
}
