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
	RepsDone          int           `json:"reps_done"` // fewer than Reps when -reps-budget ran out
	Disk              DiskCheck     `json:"disk"`
	ClickHouseVersion string        `json:"clickhouse_version,omitempty"`
	ClickHousePid     int           `json:"clickhouse_pid,omitempty"`
	Servers           []ServerInfo  `json:"servers"` // in the order of -backends, then ClickHouse's SQL
	IdleWaitSeconds   float64       `json:"idle_wait_seconds"`
	StartedIdle       bool          `json:"started_idle"`
	Queries           []QueryResult `json:"queries"`
	Core              CoreUse       `json:"server_core"`
}

// ServerInfo is one server the queries were asked of, and its load.
type ServerInfo struct {
	Name    string      `json:"name"` // "node pebble", "node clickhouse", "clickhouse SQL"
	Version string      `json:"version"`
	Pid     int         `json:"pid"`
	CPUs    string      `json:"cpus"`
	Load    LoadFigures `json:"load"`
	// MaterializeSeconds: a ClickHouse-backed node, from the load's end
	// until its closed hours were written as rows (waitMaterialized).
	MaterializeSeconds float64 `json:"materialize_seconds,omitempty"`
	MaterializeStuck   string  `json:"materialize_stuck,omitempty"`
	// Late: events older than the embedded store's late window on
	// arrival (folded all the same).
	Late uint64 `json:"late,omitempty"`
	// DiskBytes is a node's data folder after the load (a
	// ClickHouse-backed node keeps only its link and site there); for
	// ClickHouse's SQL, the server's whole data folder, which holds the
	// ClickHouse-backed node's events too.
	DiskBytes int64 `json:"disk_bytes"`
}

// LoadFigures is one server's load of the hot data: for a node, from
// its first batch to its count of all of them.
type LoadFigures struct {
	Events          int     `json:"events"`
	Seconds         float64 `json:"seconds"`
	EventsPerSecond float64 `json:"events_per_second"`
}

func loadFigures(st harness.IngestStats) LoadFigures {
	return LoadFigures{Events: st.Events, Seconds: st.Elapsed.Seconds(), EventsPerSecond: st.PerSecond()}
}

// QueryResult is one query's latencies on every server (client side,
// request sent to answer read, one keep-alive connection) and the check
// of each server's answer.
type QueryResult struct {
	Name  string       `json:"name"`
	Sides []SideResult `json:"sides"` // in the order of Report.Servers
}

// SideResult is one server's answers to one query.
type SideResult struct {
	Server    string  `json:"server"`
	Path      string  `json:"node_path,omitempty"`
	SQL       string  `json:"clickhouse_sql,omitempty"` // ClickHouse's SQL side only
	P50Micros float64 `json:"p50_us"`
	P99Micros float64 `json:"p99_us"`
	MaxMicros float64 `json:"max_us"`
	// P50Ratio and P99Ratio are over the first server's (the first of
	// -backends).
	P50Ratio float64 `json:"p50_ratio"`
	P99Ratio float64 `json:"p99_ratio"`
	Check    Check   `json:"check"`
	// FirstMicros is the unmeasured first answer (the checked one, cold).
	FirstMicros float64 `json:"first_us"`
	Answered    int     `json:"answered"` // timed repetitions it answered
	// Skipped says why the server stopped being asked (a -query-timeout);
	// its figures cover the repetitions before.
	Skipped string `json:"skipped,omitempty"`

	took []time.Duration
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
		sides := r.Queries[i].Sides
		for j := range sides {
			s := &sides[j]
			slices.Sort(s.took)
			s.Answered = len(s.took)
			s.P50Micros, s.P99Micros = harness.Micros(quantile(s.took, 0.5)), harness.Micros(quantile(s.took, 0.99))
			s.MaxMicros = harness.Micros(quantile(s.took, 1))
			s.P50Ratio = harness.Ratio(s.P50Micros, sides[0].P50Micros)
			s.P99Ratio = harness.Ratio(s.P99Micros, sides[0].P99Micros)
		}
	}
}

// side returns query q's result on server name, if it ran there.
func (q QueryResult) side(name string) (SideResult, bool) {
	for _, s := range q.Sides {
		if s.Server == name {
			return s, true
		}
	}
	return SideResult{}, false
}

func (r *Report) print(w io.Writer) {
	fmt.Fprintf(w, "\n%d repetitions each, %s to %s, a link with %d clicks a day and a site with %d pageviews a day; load average %s at the start, %s at the end\n",
		r.Reps, r.From, r.To, r.ClicksPerDay, r.PageviewsPerDay, r.LoadAverageStart, r.LoadAverageEnd)
	for _, s := range r.Servers {
		fmt.Fprintf(w, "loaded %s (%s, pid %d, CPU %s): %d events in %.1f s (%.0f/s), %d MiB on disk", s.Name, s.Version, s.Pid, s.CPUs, s.Load.Events, s.Load.Seconds, s.Load.EventsPerSecond, s.DiskBytes>>20)
		if s.Late > 0 {
			fmt.Fprintf(w, ", %d of them past its late window (folded all the same)", s.Late)
		}
		fmt.Fprintln(w)
	}
	if len(r.Servers) == 0 {
		return
	}
	first := r.Servers[0].Name
	if r.RepsDone < r.Reps {
		fmt.Fprintf(w, "only %d of the %d repetitions ran (-reps-budget)\n", r.RepsDone, r.Reps)
	}
	fmt.Fprintf(w, "\n| query | server | timed answers | p50 | p99 | max | p50, p99 ÷ %s | first answer (checked) |\n", first)
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, q := range r.Queries {
		for _, s := range q.Sides {
			answered := fmt.Sprint(s.Answered)
			if s.Skipped != "" {
				answered += " (then " + s.Skipped + ")"
			}
			p99 := harness.FormatMicros(s.P99Micros)
			if s.Answered > 0 && s.Answered < minReps {
				p99 += " (the largest)"
			}
			ratio := "-"
			if s.P50Ratio > 0 {
				ratio = fmt.Sprintf("%.3f, %.3f", s.P50Ratio, s.P99Ratio)
			}
			check := s.Check.String()
			if s.FirstMicros > 0 {
				check += " in " + harness.FormatMicros(s.FirstMicros)
			} else {
				check = "none"
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", q.Name, s.Server, answered,
				harness.FormatMicros(s.P50Micros), p99, harness.FormatMicros(s.MaxMicros), ratio, check)
		}
	}
	r.Core.print(w)
	for _, q := range r.Queries {
		for _, s := range q.Sides {
			if !s.Check.OK() && s.FirstMicros > 0 {
				fmt.Fprintf(w, "WARNING: the answer of %s to %q is incomplete (%s): its latency is not comparable\n", s.Server, q.Name, s.Check)
			}
		}
	}
}
