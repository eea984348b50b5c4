package main

import (
	"fmt"
	"io"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

// Report is the whole result of a run; it is also the -out JSON.
type Report struct {
	harness.RunInfo
	Links       int     `json:"links"`
	LoadSeconds float64 `json:"load_seconds"`
	Conns       int     `json:"conns"`
	Warmup      string  `json:"warmup"`
	Duration    string  `json:"duration"`
	Rounds      []Round `json:"rounds"`
	Summary     Summary `json:"summary"`
}

// Round is one baseline run and one node run, back to back.
type Round struct {
	Number   int         `json:"number"`
	Baseline Measurement `json:"baseline"`
	Node     Measurement `json:"node"`
	Ratio    float64     `json:"ratio"` // node req/s over baseline req/s
}

// Measurement is one load run against one server.
type Measurement struct {
	Target string  `json:"target"`
	RPS    float64 `json:"rps"`
	harness.RunFigures
}

// Summary holds the medians over all rounds.
type Summary struct {
	Baseline Measurement `json:"baseline"`
	Node     Measurement `json:"node"`
	Ratio    float64     `json:"ratio"`     // median of the per-round ratios
	P99Ratio float64     `json:"p99_ratio"` // node p99 over baseline p99, from the medians
	Target   float64     `json:"target"`
	Pass     bool        `json:"pass"`
	Errors   uint64      `json:"errors"` // over all runs of both servers
}

func newReport(cfg config, links int, loadTime time.Duration) *Report {
	return &Report{
		RunInfo: harness.NewRunInfo(),
		Links:   links, LoadSeconds: loadTime.Seconds(), Conns: cfg.Conns,
		Warmup: cfg.Warmup.String(), Duration: cfg.Duration.String(),
		Summary: Summary{Target: cfg.Target},
	}
}

func newMeasurement(name string, res *harness.LoadResult) Measurement {
	return Measurement{
		Target:     name,
		RPS:        res.RPS(),
		RunFigures: harness.NewRunFigures(res.Latency, res.OK, res.Errors(), res.Statuses, res.TransportErrors, res.FirstError),
	}
}

// summarize fills Summary with the median of every figure over the rounds.
func (r *Report) summarize() {
	s := &r.Summary
	nodeName := "node"
	if len(r.Rounds) > 0 {
		nodeName = r.Rounds[0].Node.Target // "baseline-b" in an A/A run
	}
	s.Baseline = medianMeasurement("baseline", r.Rounds, func(rd Round) Measurement { return rd.Baseline })
	s.Node = medianMeasurement(nodeName, r.Rounds, func(rd Round) Measurement { return rd.Node })
	s.Ratio = harness.Median(r.Rounds, func(rd Round) float64 { return rd.Ratio })
	s.P99Ratio = harness.Ratio(s.Node.P99Micros, s.Baseline.P99Micros)
	s.Errors = s.Baseline.Errors + s.Node.Errors
	s.Pass = s.Ratio >= s.Target && s.Errors == 0
}

func medianMeasurement(name string, rounds []Round, pick func(Round) Measurement) Measurement {
	return Measurement{
		Target:     name,
		RPS:        harness.Median(rounds, func(rd Round) float64 { return pick(rd).RPS }),
		RunFigures: harness.MedianFigures(rounds, func(rd Round) harness.RunFigures { return pick(rd).RunFigures }),
	}
}

// printRun writes one line as soon as a run ends, so a long benchmark shows
// progress.
func printRun(w io.Writer, round int, m Measurement) {
	errNote := ""
	if m.Errors > 0 {
		errNote = fmt.Sprintf("  first error: %s", m.FirstError)
	}
	harness.PrintRunLine(w, round, m.Target, 10, m.RPS, "req/s", m.RunFigures, errNote)
}

func (r *Report) print(w io.Writer) {
	s := r.Summary
	fmt.Fprintf(w, "\nmedian of %d rounds (%d links, %d conns, %s per run):\n", len(r.Rounds), r.Links, r.Conns, r.Duration)
	harness.PrintFiguresTable(w, "req/s",
		harness.FiguresRow{Target: s.Baseline.Target, Rate: s.Baseline.RPS, RunFigures: s.Baseline.RunFigures},
		harness.FiguresRow{Target: s.Node.Target, Rate: s.Node.RPS, RunFigures: s.Node.RunFigures})
	ratios := make([]float64, len(r.Rounds))
	for i, rd := range r.Rounds {
		ratios[i] = rd.Ratio
	}
	verdict := "PASS"
	if !s.Pass {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "%s/baseline throughput: %.3f (rounds %v); target >= %.2f: %s\n", s.Node.Target, s.Ratio, harness.FormatRatios(ratios), s.Target, verdict)
	fmt.Fprintf(w, "%s/baseline p99: %.2fx\n", s.Node.Target, s.P99Ratio)
}
