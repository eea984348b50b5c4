package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/waymark/waymark/bench/harness"
)

// Report is the whole result of a run; it is also the -out JSON.
type Report struct {
	harness.RunInfo
	LoadAverageStart string       `json:"load_average_start"`
	LoadAverageEnd   string       `json:"load_average_end"`
	LoadGenerator    string       `json:"load_generator"`
	LoadGeneratorCPU string       `json:"load_generator_cpus"`
	Links            int          `json:"links"`
	Visitors         int          `json:"visitors"`
	Conns            int          `json:"conns"`
	Warmup           string       `json:"warmup"`
	Duration         string       `json:"duration"`
	Servers          []ServerInfo `json:"servers"`
	Rounds           []Round      `json:"rounds"`
	Summary          []Summary    `json:"summary"`
}

// ServerInfo describes one server under test.
type ServerInfo struct {
	Name          string `json:"name"`
	What          string `json:"what"`
	Pid           int    `json:"pid"`
	Helpers       []int  `json:"helper_pids,omitempty"`
	Affinity      string `json:"cpus"`
	Note          string `json:"note,omitempty"`
	ResponseBytes int    `json:"response_bytes"` // one 302 on the wire
	Paths         int    `json:"paths"`
}

// Round is one run of every server, in rotated order.
type Round struct {
	Number int           `json:"number"`
	Runs   []Measurement `json:"runs"`
}

// Measurement is one load run against one server.
type Measurement struct {
	Target string  `json:"target"`
	RPS    float64 `json:"rps"`
	harness.RunFigures
	// CPUMicrosPerRequest is the server's utime+stime over the measured
	// window divided by the requests answered in it.
	CPUMicrosPerRequest float64 `json:"cpu_us_per_request"`
	// CPUShare is that CPU time over the window's length: near 1 the
	// server's core was saturated; well below, the load generator or the
	// machine held it back.
	CPUShare float64 `json:"cpu_share"`
	// HelperCPUShare is the same for the edge's separate aggregator.
	HelperCPUShare float64 `json:"helper_cpu_share,omitempty"`
	// LoadGenCPUShare is the load generator's CPU time over the window:
	// near 1, it was the bottleneck.
	LoadGenCPUShare float64 `json:"load_generator_cpu_share"`
	// OthersOnServerCPU and OthersOnLoadCPU are the shares of the two
	// CPUs that other processes (not the server, its helper, the load
	// generator or the harness) used in the window: the machine's noise.
	OthersOnServerCPU float64 `json:"others_on_server_cpu"`
	OthersOnLoadCPU   float64 `json:"others_on_load_cpu"`
	IdleWaitSeconds   float64 `json:"idle_wait_seconds"`
	StartedIdle       bool    `json:"started_idle"`
	LoadAverage       string  `json:"load_average"`
}

// Summary is one server's medians over the rounds and its ratios to the
// floor: each the median of the per-round ratios, the floor measured in
// the same round.
type Summary struct {
	Target string `json:"target"`
	What   string `json:"what"`
	RPS    float64
	harness.RunFigures
	CPUMicrosPerRequest float64   `json:"cpu_us_per_request"`
	CPUShare            float64   `json:"cpu_share"`
	HelperCPUShare      float64   `json:"helper_cpu_share,omitempty"`
	LoadGenCPUShare     float64   `json:"load_generator_cpu_share"`
	OthersOnServerCPU   float64   `json:"others_on_server_cpu"`
	OthersOnLoadCPU     float64   `json:"others_on_load_cpu"`
	RPSRatio            float64   `json:"rps_ratio"`
	CPURatio            float64   `json:"cpu_per_request_ratio"`
	P99Ratio            float64   `json:"p99_ratio"`
	RPSRatios           []float64 `json:"rps_ratios"`
	NotIdleRuns         int       `json:"not_idle_runs"` // runs that started before every server was idle
	ResponseBytes       int       `json:"response_bytes"`
}

func newReport(cfg config, loadAffinity string) *Report {
	return &Report{
		RunInfo: harness.NewRunInfo(), LoadAverageStart: harness.LoadAverage(), LoadGenerator: cfg.LoadGen, LoadGeneratorCPU: loadAffinity,
		Links: cfg.Links, Visitors: cfg.Visitors, Conns: cfg.Conns,
		Warmup: cfg.Warmup.String(), Duration: cfg.Duration.String(),
	}
}

func (r *Report) runsOf(target string) []Measurement {
	var out []Measurement
	for _, rd := range r.Rounds {
		for _, m := range rd.Runs {
			if m.Target == target {
				out = append(out, m)
			}
		}
	}
	return out
}

// roundRatios returns, per round that measured both, pick(target)/pick(floor).
func (r *Report) roundRatios(target string, pick func(Measurement) float64) []float64 {
	var out []float64
	for _, rd := range r.Rounds {
		var t, f *Measurement
		for i := range rd.Runs {
			if rd.Runs[i].Target == target {
				t = &rd.Runs[i]
			}
			if rd.Runs[i].Target == targetFloor {
				f = &rd.Runs[i]
			}
		}
		if t != nil && f != nil {
			out = append(out, harness.Ratio(pick(*t), pick(*f)))
		}
	}
	return out
}

func (r *Report) summarize() {
	r.LoadAverageEnd = harness.LoadAverage()
	id := func(v float64) float64 { return v }
	for _, info := range r.Servers {
		runs := r.runsOf(info.Name)
		s := Summary{
			Target: info.Name, What: info.What, ResponseBytes: info.ResponseBytes,
			RPS:                 harness.Median(runs, func(m Measurement) float64 { return m.RPS }),
			RunFigures:          harness.MedianFigures(runs, func(m Measurement) harness.RunFigures { return m.RunFigures }),
			CPUMicrosPerRequest: harness.Median(runs, func(m Measurement) float64 { return m.CPUMicrosPerRequest }),
			CPUShare:            harness.Median(runs, func(m Measurement) float64 { return m.CPUShare }),
			HelperCPUShare:      harness.Median(runs, func(m Measurement) float64 { return m.HelperCPUShare }),
			LoadGenCPUShare:     harness.Median(runs, func(m Measurement) float64 { return m.LoadGenCPUShare }),
			OthersOnServerCPU:   harness.Median(runs, func(m Measurement) float64 { return m.OthersOnServerCPU }),
			OthersOnLoadCPU:     harness.Median(runs, func(m Measurement) float64 { return m.OthersOnLoadCPU }),
			RPSRatios:           r.roundRatios(info.Name, func(m Measurement) float64 { return m.RPS }),
		}
		s.RPSRatio = harness.Median(s.RPSRatios, id)
		s.CPURatio = harness.Median(r.roundRatios(info.Name, func(m Measurement) float64 { return m.CPUMicrosPerRequest }), id)
		s.P99Ratio = harness.Median(r.roundRatios(info.Name, func(m Measurement) float64 { return m.P99Micros }), id)
		for _, m := range runs {
			if !m.StartedIdle {
				s.NotIdleRuns++
			}
		}
		r.Summary = append(r.Summary, s)
	}
}

func (r *Report) errors() uint64 {
	var n uint64
	for _, s := range r.Summary {
		n += s.Errors
	}
	return n
}

// printRun writes one line as soon as a run ends.
func printRun(w io.Writer, round int, m Measurement) {
	note := fmt.Sprintf("  cpu %.2fµs/req (%.0f%% busy)", m.CPUMicrosPerRequest, 100*m.CPUShare)
	if m.HelperCPUShare > 0 {
		note += fmt.Sprintf(", aggregator %.0f%% busy", 100*m.HelperCPUShare)
	}
	note += fmt.Sprintf("; loadgen %.0f%% busy; others %.0f%%/%.0f%% of the server/load CPU", 100*m.LoadGenCPUShare, 100*m.OthersOnServerCPU, 100*m.OthersOnLoadCPU)
	note += fmt.Sprintf("; idle after %.1fs", m.IdleWaitSeconds)
	if !m.StartedIdle {
		note += " (NOT idle: timed out)"
	}
	if m.Errors > 0 {
		note += "; first error: " + m.FirstError
	}
	harness.PrintRunLine(w, round, m.Target, 15, m.RPS, "req/s", m.RunFigures, note)
}

// print writes the summary as a Markdown table, ready for bench/README.md.
func (r *Report) print(w io.Writer) {
	fmt.Fprintf(w, "\nmedians of %d rounds (%d links, %d visitors, %d conns, %s per run; load generator %s on CPU %s; load average %s at the start, %s at the end):\n\n",
		len(r.Rounds), r.Links, r.Visitors, r.Conns, r.Duration, r.LoadGenerator, r.LoadGeneratorCPU, r.LoadAverageStart, r.LoadAverageEnd)
	fmt.Fprintln(w, "| server | req/s | p50 | p99 | server CPU µs/request | server CPU busy | load generator busy | others on server / load CPU | req/s ÷ floor | CPU/request ÷ floor | p99 ÷ floor | bytes/answer |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range r.Summary {
		busy := fmt.Sprintf("%.0f%%", 100*s.CPUShare)
		if s.HelperCPUShare > 0 {
			busy += fmt.Sprintf(" (aggregator %.0f%%)", 100*s.HelperCPUShare)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %.2f | %s | %.0f%% | %.0f%% / %.0f%% | %s | %s | %s | %d |\n",
			s.What, kilo(s.RPS), harness.FormatMicros(s.P50Micros), harness.FormatMicros(s.P99Micros),
			s.CPUMicrosPerRequest, busy, 100*s.LoadGenCPUShare, 100*s.OthersOnServerCPU, 100*s.OthersOnLoadCPU,
			ratio(s.RPSRatio), ratio(s.CPURatio), ratio(s.P99Ratio), s.ResponseBytes)
	}
	fmt.Fprintln(w)
	for _, s := range r.Summary {
		line := fmt.Sprintf("%s: req/s ÷ floor per round %v", s.Target, harness.FormatRatios(s.RPSRatios))
		if s.NotIdleRuns > 0 {
			line += fmt.Sprintf("; %d run(s) started before the servers were idle", s.NotIdleRuns)
		}
		if s.Errors > 0 {
			line += fmt.Sprintf("; %d FAILED requests", s.Errors)
		}
		fmt.Fprintln(w, line)
	}
	for _, info := range r.Servers {
		fmt.Fprintf(w, "%s runs on CPU %s%s\n", info.Name, info.Affinity, strings.TrimSuffix(", "+info.Note, ", "))
	}
}

func kilo(v float64) string {
	if v >= 10_000 {
		return fmt.Sprintf("%.0fk", v/1000)
	}
	return fmt.Sprintf("%.0f", v)
}

func ratio(v float64) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", v)
}
