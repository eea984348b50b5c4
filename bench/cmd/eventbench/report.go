package main

import (
	"fmt"
	"io"

	"github.com/waymark/waymark/bench/harness"
)

// Report is the whole result of a run; it is also the -out JSON.
type Report struct {
	harness.RunInfo
	Sites    int          `json:"sites"`
	Conns    int          `json:"conns"`
	Warmup   string       `json:"warmup"`
	Duration string       `json:"duration"`
	Rounds   []Round      `json:"rounds"`
	Summary  Summary      `json:"summary"`
	Stored   *StoredCheck `json:"stored,omitempty"`
}

// Round is one baseline run and one node run, back to back.
type Round struct {
	Number   int         `json:"number"`
	Baseline Measurement `json:"baseline"`
	Node     Measurement `json:"node"`
	Ratio    float64     `json:"ratio"` // node events/s over baseline events/s
}

// Measurement is one load run against one server, inside its window.
// Errors counts any other status, a drop header, or no answer.
type Measurement struct {
	Target string  `json:"target"`
	RPS    float64 `json:"events_per_s"` // accepted events per second
	harness.RunFigures
	Dropped map[string]uint64 `json:"dropped,omitempty"`
}

// Summary holds the medians over all rounds.
type Summary struct {
	Baseline Measurement `json:"baseline"`
	Node     Measurement `json:"node"`
	Ratio    float64     `json:"ratio"`     // median of the per-round ratios
	P99Ratio float64     `json:"p99_ratio"` // node p99 over baseline p99, from the medians
	Errors   uint64      `json:"errors"`    // over all runs of both servers
}

func newReport(cfg config) *Report {
	return &Report{
		RunInfo: harness.NewRunInfo(),
		Sites:   cfg.Sites, Conns: cfg.Conns,
		Warmup: cfg.Warmup.String(), Duration: cfg.Duration.String(),
	}
}

func newMeasurement(name string, res *harness.EventLoadResult) Measurement {
	m := Measurement{
		Target:     name,
		RPS:        res.RPS(),
		RunFigures: harness.NewRunFigures(res.Latency, res.OK, res.Errors(), res.Statuses, res.TransportErrors, res.FirstError),
	}
	if len(res.Dropped) > 0 {
		m.Dropped = res.Dropped
	}
	return m
}

// summarize fills Summary with the median of every figure over the rounds.
func (r *Report) summarize() {
	s := &r.Summary
	s.Baseline = medianMeasurement("baseline", r.Rounds, func(rd Round) Measurement { return rd.Baseline })
	s.Node = medianMeasurement("node", r.Rounds, func(rd Round) Measurement { return rd.Node })
	s.Ratio = harness.Median(r.Rounds, func(rd Round) float64 { return rd.Ratio })
	s.P99Ratio = harness.Ratio(s.Node.P99Micros, s.Baseline.P99Micros)
	s.Errors = s.Baseline.Errors + s.Node.Errors
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
		if len(m.Dropped) > 0 {
			errNote += fmt.Sprintf("; dropped %v", m.Dropped)
		}
	}
	harness.PrintRunLine(w, round, m.Target, 8, m.RPS, "events/s", m.RunFigures, errNote)
}

func (r *Report) print(w io.Writer) {
	s := r.Summary
	fmt.Fprintf(w, "\nmedian of %d rounds (%d site(s), %d conns, %s per run):\n", len(r.Rounds), r.Sites, r.Conns, r.Duration)
	harness.PrintFiguresTable(w, "events/s",
		harness.FiguresRow{Target: s.Baseline.Target, Rate: s.Baseline.RPS, RunFigures: s.Baseline.RunFigures},
		harness.FiguresRow{Target: s.Node.Target, Rate: s.Node.RPS, RunFigures: s.Node.RunFigures})
	ratios := make([]float64, len(r.Rounds))
	for i, rd := range r.Rounds {
		ratios[i] = rd.Ratio
	}
	fmt.Fprintf(w, "node/baseline throughput: %.3f (rounds %v)\n", s.Ratio, harness.FormatRatios(ratios))
	fmt.Fprintf(w, "node/baseline p99: %.2fx\n", s.P99Ratio)
}
