package main

import (
	"fmt"
	"io"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

// Report is the result of a run; it is also the -out JSON.
type Report struct {
	harness.RunInfo
	LoadAverageStart string       `json:"load_average_start"`
	LoadAverageEnd   string       `json:"load_average_end"`
	Config           ReportConfig `json:"config"`
	Generated        int          `json:"generated"`
	Clicks           int          `json:"clicks"`
	Sinks            []SinkResult `json:"sinks"`
	// NodeToClickHouse is the node's events/s over ClickHouse's.
	NodeToClickHouse float64 `json:"node_to_clickhouse"`
}

// ReportConfig is what the events and batches looked like.
type ReportConfig struct {
	Events           int     `json:"events"`
	Days             int     `json:"days"`
	Sites            int     `json:"sites"`
	Links            int     `json:"links"`
	Visitors         int     `json:"visitors"`
	Pages            int     `json:"pages"`
	ClickShare       float64 `json:"click_share"`
	SegmentEvents    int     `json:"segment_events"`
	SegmentsPerBatch int     `json:"segments_per_batch"`
	CHBatch          int     `json:"clickhouse_batch_rows"`
	ServerCPU        string  `json:"server_cpus"`
	GeneratorCPU     string  `json:"generator_cpus"`
	Seed             uint64  `json:"seed"`
	// Start is the stream's first instant (the generator's traffic
	// curve follows the time of day, so the stream depends on it).
	Start time.Time `json:"start"`
}

// SinkResult is one server's load of the stream.
type SinkResult struct {
	Target  string `json:"target"`
	Version string `json:"version"`
	Pid     int    `json:"pid"`
	harness.IngestStats
	EventsPerSecond   float64 `json:"events_per_second"`
	CPUSeconds        float64 `json:"cpu_seconds"`      // the server's utime+stime over the load
	CPUMicrosPerEvent float64 `json:"cpu_us_per_event"` // that over the events
	CPUShare          float64 `json:"cpu_share"`        // that over the elapsed time: cores busy
	PeakRSSBytes      int64   `json:"peak_rss_bytes"`   // VmHWM of the server process
	DiskBytes         int64   `json:"disk_bytes"`       // its data files after the load
	Counted           uint64  `json:"counted"`          // events it holds by its own count
	CountOK           bool    `json:"count_ok"`         // Counted is what was sent
	Stored            uint64  `json:"stored,omitempty"` // node: events_stored_total
	Late              uint64  `json:"late,omitempty"`   // node: older than the late window on arrival (folded all the same)
	Deduplicated      uint64  `json:"deduplicated,omitempty"`
	Dropped           uint64  `json:"dropped,omitempty"` // node: expired or in the future
	// ToClickHouse is EventsPerSecond over the raw clickhouse insert's,
	// when both ran.
	ToClickHouse float64 `json:"to_clickhouse,omitempty"`
	// ClickHouse-backed sinks: segments (or parts) posted, each
	// aggregator's share, and every process of the sink (ClickHouse
	// first) with its CPU over the load; the sink's CPU figures are
	// their sum.
	Parts       int                   `json:"parts,omitempty"`
	Aggregators []harness.TargetShare `json:"aggregators,omitempty"`
	Processes   []ProcessUse          `json:"processes,omitempty"`
}

// ProcessUse is one process of a sink.
type ProcessUse struct {
	Name         string  `json:"name"`
	Pid          int     `json:"pid"`
	CPUs         string  `json:"cpus"` // what it was pinned to
	CPUSeconds   float64 `json:"cpu_seconds"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
}

func newReport(cfg config) *Report {
	return &Report{
		RunInfo: harness.NewRunInfo(), LoadAverageStart: harness.LoadAverage(),
		Config: ReportConfig{
			Events: cfg.Events, Days: cfg.Days, Sites: cfg.Sites, Links: cfg.Links, Visitors: cfg.Visitors, Pages: cfg.Pages,
			ClickShare: cfg.ClickShare, SegmentEvents: cfg.SegmentEvents, SegmentsPerBatch: cfg.SegmentsPerBatch, CHBatch: cfg.CHBatch,
			ServerCPU: cpuLabel(cfg.ServerCPU), GeneratorCPU: cpuLabel(cfg.LoadCPU), Seed: cfg.Seed,
		},
	}
}

func (r *SinkResult) fill(st harness.IngestStats, cpu time.Duration) {
	r.IngestStats = st
	r.EventsPerSecond = st.PerSecond()
	r.CPUSeconds = cpu.Seconds()
	if st.Events > 0 {
		r.CPUMicrosPerEvent = harness.Micros(cpu) / float64(st.Events)
	}
	if st.Elapsed > 0 {
		r.CPUShare = cpu.Seconds() / st.Elapsed.Seconds()
	}
}

func (r *Report) finish() {
	r.LoadAverageEnd = harness.LoadAverage()
	var node, ch float64
	for _, s := range r.Sinks {
		switch s.Target {
		case sinkNode:
			node = s.EventsPerSecond
		case sinkClickHouse:
			ch = s.EventsPerSecond
		}
	}
	r.NodeToClickHouse = harness.Ratio(node, ch)
	for i := range r.Sinks {
		if s := &r.Sinks[i]; s.Target != sinkClickHouse {
			s.ToClickHouse = harness.Ratio(s.EventsPerSecond, ch)
		}
	}
}

func (r *Report) print(w io.Writer) {
	fmt.Fprintf(w, "\n%d events (%d clicks) over %d days, %d sites, %d links, %d visitors; load average %s at the start, %s at the end\n\n",
		r.Generated, r.Clicks, r.Config.Days, r.Config.Sites, r.Config.Links, r.Config.Visitors, r.LoadAverageStart, r.LoadAverageEnd)
	fmt.Fprintln(w, "| target | events/s | ÷ raw ClickHouse insert | elapsed | server CPU µs/event | cores busy | generator stall | peak RSS | on disk | count |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range r.Sinks {
		count := "OK"
		if !s.CountOK {
			count = fmt.Sprintf("**%d of %d**", s.Counted, s.Events)
		}
		ratio := "-"
		if s.Target == sinkClickHouse {
			ratio = "1"
		} else if s.ToClickHouse > 0 {
			ratio = fmt.Sprintf("%.3f", s.ToClickHouse)
		}
		fmt.Fprintf(w, "| %s (%s) | %.0f | %s | %.2f s | %.2f | %.2f | %.2f s | %d MiB | %d MiB | %s |\n",
			s.Target, s.Version, s.EventsPerSecond, ratio, s.Elapsed.Seconds(), s.CPUMicrosPerEvent, s.CPUShare,
			s.Stall.Seconds(), s.PeakRSSBytes>>20, s.DiskBytes>>20, count)
	}
	fmt.Fprintln(w)
	for _, s := range r.Sinks {
		if s.ToClickHouse > 0 {
			fmt.Fprintf(w, "%s / raw ClickHouse insert, events/s: %.3f\n", s.Target, s.ToClickHouse)
		}
	}
	for _, s := range r.Sinks {
		if len(s.Processes) == 0 {
			continue
		}
		what := "whole segments"
		if len(s.Aggregators) > 0 {
			what = "segment parts"
		}
		fmt.Fprintf(w, "%s: %d %s posted", s.Target, s.Parts, what)
		for _, a := range s.Aggregators {
			fmt.Fprintf(w, "; %s took %d events in %d parts, %d requests", a.Name, a.Events, a.Parts, a.Batches)
		}
		fmt.Fprint(w, "\n  CPU over the load:")
		for _, p := range s.Processes {
			fmt.Fprintf(w, " %s (pid %d, CPU %s) %.2f s, peak RSS %d MiB;", p.Name, p.Pid, p.CPUs, p.CPUSeconds, p.PeakRSSBytes>>20)
		}
		fmt.Fprintln(w, " all on the same CPUs, so they compete for them")
	}
	for _, s := range r.Sinks {
		if s.Target != sinkNode {
			continue
		}
		fmt.Fprintf(w, "node: %d stored, of them %d (%.1f%%) older than its late window on arrival (folded all the same); %d deduplicated, %d dropped (expired or future)\n",
			s.Stored, s.Late, 100*harness.Ratio(float64(s.Late), float64(s.Stored)), s.Deduplicated, s.Dropped)
		if s.Late > 0 {
			fmt.Fprintln(w, "  its figure covers the rollup work of the other events only; -days 1 keeps the stream inside the window")
		}
	}
}
