package main

import (
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/waymark/waymark/bench/harness"
)

// Report is the result of a run; it is also the -out JSON.
type Report struct {
	harness.RunInfo
	LoadAverageStart string `json:"load_average_start"`
	LoadAverageEnd   string `json:"load_average_end"`
	NodePid          int    `json:"node_pid"`
	Links            int    `json:"links"`
	Visitors         int    `json:"visitors"`
	Conns            int    `json:"conns"`
	LoadGenerator    string `json:"load_generator"`
	Duration         string `json:"duration"`

	RPS float64 `json:"rps"`
	harness.RunFigures
	NodeCPUShare float64 `json:"node_cpu_share"` // node CPU time over the window: near 1 is saturated

	// Answered is the 302s the load generator counted; Offered is what the
	// node counted as captured or dropped (written + dropped). They differ
	// by at most the requests in flight when wrk stopped.
	Answered        uint64            `json:"answered"`
	Offered         uint64            `json:"offered"`
	Written         uint64            `json:"written"`
	Dropped         uint64            `json:"dropped"`
	DroppedByReason map[string]uint64 `json:"dropped_by_reason"`
	DropShare       float64           `json:"drop_share"`

	// SettleSeconds is from the end of the load until the aggregator held
	// every written click (polled every 100 ms).
	SettleSeconds  float64 `json:"settle_seconds"`
	SettleTimedOut bool    `json:"settle_timed_out"`
	Stored         uint64  `json:"stored"`       // new raw events in the aggregator
	StatsClicks    uint64  `json:"stats_clicks"` // new clicks in the links' stats, bots included
	// StatsDropped is the new dropped_events of the links' stats: the
	// drops the answers own up to. It must equal the drops that are
	// tallied (every reason but closed), or an undercount is silent.
	StatsDropped uint64 `json:"stats_dropped"`

	MaxDropShare     float64 `json:"max_drop_share"`
	MaxSettleSeconds float64 `json:"max_settle_seconds"`
	Pass             bool    `json:"pass"`
}

func newReport(cfg config) *Report {
	return &Report{
		RunInfo: harness.NewRunInfo(), LoadAverageStart: harness.LoadAverage(),
		Links: cfg.Links, Visitors: cfg.Visitors, Conns: cfg.Conns, LoadGenerator: cfg.LoadGen, Duration: cfg.Duration.String(),
		MaxDropShare: cfg.MaxDropShare, MaxSettleSeconds: cfg.MaxSettle.Seconds(),
	}
}

// account takes the differences of the two snapshots around the load.
func (r *Report) account(before, after snapshot, answered uint64) {
	r.Answered = answered
	r.Written = uint64(after.Written - before.Written)
	r.DroppedByReason = map[string]uint64{}
	for reason, v := range after.Dropped {
		if d := uint64(v - before.Dropped[reason]); d > 0 {
			r.DroppedByReason[reason] = d
			r.Dropped += d
		}
	}
	r.Offered = r.Written + r.Dropped
	r.DropShare = harness.Ratio(float64(r.Dropped), float64(r.Offered))
}

func (r *Report) finish(cfg config) {
	r.LoadAverageEnd = harness.LoadAverage()
	r.Pass = r.Errors == 0 && r.DropShare <= cfg.MaxDropShare && !r.SettleTimedOut &&
		r.SettleSeconds <= cfg.MaxSettle.Seconds() && r.Stored == r.Written && r.StatsClicks == r.Written &&
		r.StatsDropped == r.tallied()
}

// tallied is the drops the edge records for the stats: all but those
// after the writer stopped.
func (r *Report) tallied() uint64 { return r.Dropped - r.DroppedByReason["closed"] }

func (r *Report) print(w io.Writer) {
	fmt.Fprintf(w, "\n%s of redirects from %d visitors: %.0f req/s, p50 %s, p99 %s, node CPU %.0f%% busy, %d errors\n",
		r.Duration, r.Visitors, r.RPS, harness.FormatMicros(r.P50Micros), harness.FormatMicros(r.P99Micros), 100*r.NodeCPUShare, r.Errors)
	fmt.Fprintln(w, "\n| clicks | count |")
	fmt.Fprintln(w, "|---|---|")
	fmt.Fprintf(w, "| answered 302 (load generator) | %d |\n", r.Answered)
	fmt.Fprintf(w, "| taken by the node (written + dropped) | %d |\n", r.Offered)
	fmt.Fprintf(w, "| written to segments | %d |\n", r.Written)
	for _, reason := range slices.Sorted(maps.Keys(r.DroppedByReason)) {
		fmt.Fprintf(w, "| dropped, `%s` | %d |\n", reason, r.DroppedByReason[reason])
	}
	fmt.Fprintf(w, "| **dropped** | **%d (%.3f%%)** |\n", r.Dropped, 100*r.DropShare)
	fmt.Fprintf(w, "| stored by the aggregator | %d |\n", r.Stored)
	fmt.Fprintf(w, "| in the links' stats | %d |\n", r.StatsClicks)
	fmt.Fprintf(w, "| dropped, as the links' stats say (`dropped_events`) | %d of %d |\n", r.StatsDropped, r.tallied())
	settled := fmt.Sprintf("%.1f s", r.SettleSeconds)
	if r.SettleTimedOut {
		settled = fmt.Sprintf("not within %.0f s", r.SettleSeconds)
	}
	fmt.Fprintf(w, "| every written click counted, after the end of the load | %s |\n", settled)
	verdict := "PASS"
	if !r.Pass {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "\ntargets: dropped <= %.1f%%, settled <= %.0f s, stats = written, drops in the stats: %s (load average %s at the start, %s at the end)\n",
		100*r.MaxDropShare, r.MaxSettleSeconds, verdict, r.LoadAverageStart, r.LoadAverageEnd)
	if d := int64(r.Offered) - int64(r.Answered); d < 0 || d > int64(r.Conns) {
		fmt.Fprintf(w, "note: the node took %d clicks, the load generator counted %d answers: more apart than the %d requests in flight\n", r.Offered, r.Answered, r.Conns)
	}
}
