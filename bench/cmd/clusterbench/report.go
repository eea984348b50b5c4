package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

// Report is everything one run measured; -out writes it as JSON
// (durations in nanoseconds).
type Report struct {
	Started    time.Time
	Command    string
	GOMAXPROCS int
	CPUs       int
	Nodes      []string
	Leader     string
	Formed     time.Duration // from the first start to every node ready
	Creates    []Throughput
	Lag        []LagResult
	Takedown   *TakedownResult `json:",omitempty"`
	Catchup    *CatchupResult  `json:",omitempty"`
	Links      int             // links created in the whole run, about
	Misses     []string        // targets missed
}

// Distribution summarises a histogram.
type Distribution struct {
	N   uint64
	P50 time.Duration
	P99 time.Duration
	Max time.Duration
}

// Throughput is one closed-loop create run.
type Throughput struct {
	Via        string
	Node       string
	Conns      int
	PerSecond  float64
	Created    uint64
	Errors     uint64
	Statuses   string
	FirstError string `json:",omitempty"`
	Latency    Distribution
}

// LagResult is one pass of replication-lag samples.
type LagResult struct {
	Label               string
	Samples             int
	AllEdges            Distribution // the slowest edge of each sample
	PerEdge             map[string]Distribution
	BackgroundPerSecond float64 `json:",omitempty"`
}

// TakedownResult is the takedown propagation phase.
type TakedownResult struct {
	Takedowns int
	Nodes     int
	Ack       Distribution // DELETE sent -> 204
	ViaEdge   Distribution // DELETE sent -> 410 from the edge that took it
	AllNodes  Distribution // DELETE sent -> the last node's 410
	PerNode   map[string]Distribution
}

// CatchupResult is the bulk load and the new edge's catch-up; the
// durations of the edge count from its process start.
type CatchupResult struct {
	Loaded        int
	LoadElapsed   time.Duration
	LoadPerSecond float64
	LoadErrors    uint64
	Capped        bool // -load-max ended the load before -links
	Links         int  // about, in the store

	SnapshotIndex uint64 // leader's newest snapshot; 0 if none came
	SnapshotWait  time.Duration

	TargetApplied uint64 // leader's replica index when the edge started
	TargetCommit  uint64 // leader's commit index then
	Listening     time.Duration
	FromSnapshot  bool
	Restored      time.Duration
	RestoredIndex uint64
	Applied       time.Duration
	Resolved      time.Duration
	SampleCodes   int
}

func newReport(cfg config) *Report {
	return &Report{
		Started:    time.Now().UTC(),
		Command:    "clusterbench " + strings.Join(os.Args[1:], " "),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		CPUs:       runtime.NumCPU(),
	}
}

func (r *Report) miss(what string) { r.Misses = append(r.Misses, what) }

func (r *Report) finish(links int) { r.Links = links }

func distribution(h *harness.Histogram) Distribution {
	return Distribution{N: h.Count(), P50: round(h.Quantile(0.5)), P99: round(h.Quantile(0.99)), Max: round(h.Max())}
}

// round keeps three significant digits, as the histogram resolves no more.
func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= 100*time.Millisecond:
		return d.Round(time.Millisecond)
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	default:
		return d.Round(time.Microsecond)
	}
}

func statusSummary(m map[int]uint64) string {
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%d:%d", s, m[s]))
	}
	return strings.Join(parts, " ")
}

// print writes the summary table.
func (r *Report) print(out io.Writer) {
	fmt.Fprintf(out, "\n%s\nGOMAXPROCS %d, %d CPUs, leader %s, ~%d links created\n\n", r.Command, r.GOMAXPROCS, r.CPUs, r.Leader, r.Links)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measurement\tresult\tp50\tp99\tmax\tn\ttarget")
	for _, t := range r.Creates {
		fmt.Fprintf(tw, "creates via %s %s, %d conns\t%.0f/s\t%v\t%v\t%v\t%d (%d errors)\t%s\n",
			t.Via, t.Node, t.Conns, t.PerSecond, t.Latency.P50, t.Latency.P99, t.Latency.Max, t.Created, t.Errors,
			verdict(t.PerSecond >= createTarget, ">= 5,000/s"))
	}
	for _, l := range r.Lag {
		fmt.Fprintf(tw, "lag ack -> applied on every edge, %s\t\t%v\t%v\t%v\t%d\t\n", l.Label, l.AllEdges.P50, l.AllEdges.P99, l.AllEdges.Max, l.Samples)
	}
	if t := r.Takedown; t != nil {
		fmt.Fprintf(tw, "takedown: DELETE via an edge acknowledged\t\t%v\t%v\t%v\t%d\t\n", t.Ack.P50, t.Ack.P99, t.Ack.Max, t.Takedowns)
		fmt.Fprintf(tw, "takedown: 410 on the edge that took the DELETE\t\t%v\t%v\t%v\t%d\t\n", t.ViaEdge.P50, t.ViaEdge.P99, t.ViaEdge.Max, t.Takedowns)
		fmt.Fprintf(tw, "takedown: 410 on all %d nodes\t\t%v\t%v\t%v\t%d\t%s\n", t.Nodes, t.AllNodes.P50, t.AllNodes.P99, t.AllNodes.Max, t.Takedowns,
			verdict(t.AllNodes.P99 < takedownTarget, "p99 < 1s"))
	}
	if c := r.Catchup; c != nil {
		if c.Loaded > 0 {
			fmt.Fprintf(tw, "bulk load through the leader\t%d links in %v (%.0f/s)\t\t\t\t%d errors\t%s\n",
				c.Loaded, c.LoadElapsed.Round(time.Second), c.LoadPerSecond, c.LoadErrors, cappedNote(c))
		}
		snap := "none: log replay only"
		if c.SnapshotIndex > 0 {
			snap = fmt.Sprintf("index %d", c.SnapshotIndex)
		}
		fmt.Fprintf(tw, "leader snapshot\t%s (waited %v)\t\t\t\t\t\n", snap, c.SnapshotWait.Round(time.Second))
		if c.Resolved > 0 {
			how := "log only"
			if c.FromSnapshot {
				how = fmt.Sprintf("snapshot restored at %v", c.Restored.Round(time.Millisecond))
			}
			fmt.Fprintf(tw, "new edge catch-up, ~%d links\t%v\t\t\t\t\t%s; index %d applied at %v\n",
				c.Links, c.Resolved.Round(time.Millisecond), how, c.TargetApplied, c.Applied.Round(time.Millisecond))
		}
	}
	tw.Flush()
	if len(r.Misses) > 0 {
		fmt.Fprintf(out, "\nmissed: %s\n", strings.Join(r.Misses, "; "))
	}
}

func verdict(ok bool, target string) string {
	if ok {
		return target + ": met"
	}
	return target + ": MISSED"
}

func cappedNote(c *CatchupResult) string {
	if c.Capped {
		return "stopped by -load-max"
	}
	return ""
}
