package main

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

// Report is the result of a run; it is also the -out JSON.
type Report struct {
	harness.RunInfo
	LoadAverageStart  string        `json:"load_average_start"`
	LoadAverageEnd    string        `json:"load_average_end"`
	Scale             float64       `json:"scale"`
	ClicksPerDay      int           `json:"clicks_per_day"`
	PageviewsPerDay   int           `json:"pageviews_per_day"`
	From              string        `json:"from"`
	To                string        `json:"to"` // inclusive
	Reps              int           `json:"reps"`
	NodeVersion       string        `json:"node_version"`
	NodePid           int           `json:"node_pid"`
	ClickHouseVersion string        `json:"clickhouse_version"`
	ClickHousePid     int           `json:"clickhouse_pid"`
	NodeLoad          LoadFigures   `json:"node_load"`
	NodeLate          uint64        `json:"node_late"` // events older than the node's late window on arrival (folded all the same)
	ClickHouseLoad    LoadFigures   `json:"clickhouse_load"`
	IdleWaitSeconds   float64       `json:"idle_wait_seconds"`
	StartedIdle       bool          `json:"started_idle"`
	Queries           []QueryResult `json:"queries"`
	Core              CoreUse       `json:"server_core"`
}

// LoadFigures is one server's load of the hot data.
type LoadFigures struct {
	Events          int     `json:"events"`
	Seconds         float64 `json:"seconds"`
	EventsPerSecond float64 `json:"events_per_second"`
}

func loadFigures(st harness.IngestStats) LoadFigures {
	return LoadFigures{Events: st.Events, Seconds: st.Elapsed.Seconds(), EventsPerSecond: st.PerSecond()}
}

// QueryResult is one query's latencies on both servers (client side,
// request sent to answer read, one keep-alive connection) and the check of
// each server's answer.
type QueryResult struct {
	query
	NodeP50Micros       float64 `json:"node_p50_us"`
	NodeP99Micros       float64 `json:"node_p99_us"`
	NodeMaxMicros       float64 `json:"node_max_us"`
	ClickHouseP50Micros float64 `json:"clickhouse_p50_us"`
	ClickHouseP99Micros float64 `json:"clickhouse_p99_us"`
	ClickHouseMaxMicros float64 `json:"clickhouse_max_us"`
	P50Ratio            float64 `json:"p50_ratio"` // node over ClickHouse
	P99Ratio            float64 `json:"p99_ratio"`
	NodeCheck           Check   `json:"node_check"`
	ClickHouseCheck     Check   `json:"clickhouse_check"`

	node, ch []time.Duration
}

func newReport(cfg config) *Report {
	return &Report{RunInfo: harness.NewRunInfo(), LoadAverageStart: harness.LoadAverage(), Scale: cfg.Scale, Reps: cfg.Reps}
}

// quantile is the nearest-rank quantile of sorted durations.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(float64(len(sorted))*q+0.999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

func (r *Report) finish() {
	r.LoadAverageEnd = harness.LoadAverage()
	for i := range r.Queries {
		q := &r.Queries[i]
		slices.Sort(q.node)
		slices.Sort(q.ch)
		q.NodeP50Micros, q.NodeP99Micros = harness.Micros(quantile(q.node, 0.5)), harness.Micros(quantile(q.node, 0.99))
		q.ClickHouseP50Micros, q.ClickHouseP99Micros = harness.Micros(quantile(q.ch, 0.5)), harness.Micros(quantile(q.ch, 0.99))
		q.NodeMaxMicros, q.ClickHouseMaxMicros = harness.Micros(quantile(q.node, 1)), harness.Micros(quantile(q.ch, 1))
		q.P50Ratio = harness.Ratio(q.NodeP50Micros, q.ClickHouseP50Micros)
		q.P99Ratio = harness.Ratio(q.NodeP99Micros, q.ClickHouseP99Micros)
	}
}

func (r *Report) print(w io.Writer) {
	fmt.Fprintf(w, "\n%d repetitions each, %s to %s, a link with %d clicks a day and a site with %d pageviews a day; load average %s at the start, %s at the end\n",
		r.Reps, r.From, r.To, r.ClicksPerDay, r.PageviewsPerDay, r.LoadAverageStart, r.LoadAverageEnd)
	fmt.Fprintf(w, "loaded: node %d events in %.1f s (%.0f/s, %d of them past its late window), ClickHouse in %.1f s (%.0f/s)\n\n",
		r.NodeLoad.Events, r.NodeLoad.Seconds, r.NodeLoad.EventsPerSecond, r.NodeLate, r.ClickHouseLoad.Seconds, r.ClickHouseLoad.EventsPerSecond)
	fmt.Fprintln(w, "| query | node p50 | node p99 | ClickHouse p50 | ClickHouse p99 | node ÷ ClickHouse (p50, p99) | node answer | ClickHouse answer |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, q := range r.Queries {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %.4f, %.4f | %s | %s |\n", q.Name,
			harness.FormatMicros(q.NodeP50Micros), harness.FormatMicros(q.NodeP99Micros),
			harness.FormatMicros(q.ClickHouseP50Micros), harness.FormatMicros(q.ClickHouseP99Micros),
			q.P50Ratio, q.P99Ratio, q.NodeCheck, q.ClickHouseCheck)
	}
	r.Core.print(w)
	for _, q := range r.Queries {
		if !q.NodeCheck.OK() {
			fmt.Fprintf(w, "WARNING: the node's answer to %q is incomplete (%s): its latency is not comparable\n", q.Name, q.NodeCheck)
		}
	}
	if r.NodeLate > 0 {
		fmt.Fprintf(w, "%d of the events were older than the node's late window when they arrived (a backfill); they are folded into the rollups all the same\n", r.NodeLate)
	}
}
