package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

// Report is the whole result of a run; it is also the -out JSON.
type Report struct {
	Started    time.Time    `json:"started"`
	GoVersion  string       `json:"go_version"`
	NumCPU     int          `json:"num_cpu"`
	GOMAXPROCS int          `json:"gomaxprocs"`
	Sites      int          `json:"sites"`
	Conns      int          `json:"conns"`
	Warmup     string       `json:"warmup"`
	Duration   string       `json:"duration"`
	Rounds     []Round      `json:"rounds"`
	Summary    Summary      `json:"summary"`
	Stored     *StoredCheck `json:"stored,omitempty"`
}

// Round is one baseline run and one node run, back to back.
type Round struct {
	Number   int         `json:"number"`
	Baseline Measurement `json:"baseline"`
	Node     Measurement `json:"node"`
	Ratio    float64     `json:"ratio"` // node events/s over baseline events/s
}

// Measurement is one load run against one server, inside its window.
type Measurement struct {
	Target     string            `json:"target"`
	RPS        float64           `json:"events_per_s"` // accepted events per second
	P50Micros  float64           `json:"p50_us"`
	P99Micros  float64           `json:"p99_us"`
	MaxMicros  float64           `json:"max_us"`
	OK         uint64            `json:"ok"`
	Errors     uint64            `json:"errors"` // any other status, a drop header, or no answer
	Statuses   map[string]uint64 `json:"statuses"`
	Dropped    map[string]uint64 `json:"dropped,omitempty"`
	FirstError string            `json:"first_error,omitempty"`
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
		Started: time.Now().UTC(), GoVersion: runtime.Version(),
		NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		Sites: cfg.Sites, Conns: cfg.Conns,
		Warmup: cfg.Warmup.String(), Duration: cfg.Duration.String(),
	}
}

func newMeasurement(name string, res *harness.EventLoadResult) Measurement {
	m := Measurement{
		Target:     name,
		RPS:        res.RPS(),
		P50Micros:  micros(res.Latency.Quantile(0.50)),
		P99Micros:  micros(res.Latency.Quantile(0.99)),
		MaxMicros:  micros(res.Latency.Max()),
		OK:         res.OK,
		Errors:     res.Errors(),
		Statuses:   make(map[string]uint64, len(res.Statuses)),
		FirstError: res.FirstError,
	}
	for status, n := range res.Statuses {
		m.Statuses[strconv.Itoa(status)] = n
	}
	if res.TransportErrors > 0 {
		m.Statuses["transport"] = res.TransportErrors
	}
	if len(res.Dropped) > 0 {
		m.Dropped = res.Dropped
	}
	return m
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// summarize fills Summary with the median of every figure over the rounds.
func (r *Report) summarize() {
	s := &r.Summary
	s.Baseline = medianMeasurement("baseline", r.Rounds, func(rd Round) Measurement { return rd.Baseline })
	s.Node = medianMeasurement("node", r.Rounds, func(rd Round) Measurement { return rd.Node })
	s.Ratio = median(r.Rounds, func(rd Round) float64 { return rd.Ratio })
	s.P99Ratio = ratio(s.Node.P99Micros, s.Baseline.P99Micros)
	s.Errors = s.Baseline.Errors + s.Node.Errors
}

func medianMeasurement(name string, rounds []Round, pick func(Round) Measurement) Measurement {
	m := Measurement{Target: name}
	m.RPS = median(rounds, func(rd Round) float64 { return pick(rd).RPS })
	m.P50Micros = median(rounds, func(rd Round) float64 { return pick(rd).P50Micros })
	m.P99Micros = median(rounds, func(rd Round) float64 { return pick(rd).P99Micros })
	m.MaxMicros = median(rounds, func(rd Round) float64 { return pick(rd).MaxMicros })
	for _, rd := range rounds {
		m.OK += pick(rd).OK
		m.Errors += pick(rd).Errors
	}
	return m
}

// median returns the middle value (the mean of the two middle ones for an
// even count), or 0 with no rounds.
func median(rounds []Round, value func(Round) float64) float64 {
	if len(rounds) == 0 {
		return 0
	}
	vs := make([]float64, len(rounds))
	for i, rd := range rounds {
		vs[i] = value(rd)
	}
	slices.Sort(vs)
	mid := len(vs) / 2
	if len(vs)%2 == 1 {
		return vs[mid]
	}
	return (vs[mid-1] + vs[mid]) / 2
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
	fmt.Fprintf(w, "  round %d %-8s %8.0f events/s  p50 %s  p99 %s  max %s  errors %d%s\n",
		round, m.Target, m.RPS, fmtMicros(m.P50Micros), fmtMicros(m.P99Micros), fmtMicros(m.MaxMicros), m.Errors, errNote)
}

func (r *Report) print(w io.Writer) {
	s := r.Summary
	fmt.Fprintf(w, "\nmedian of %d rounds (%d site(s), %d conns, %s per run):\n", len(r.Rounds), r.Sites, r.Conns, r.Duration)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tevents/s\tp50\tp99\tmax\terrors\t")
	for _, m := range []Measurement{s.Baseline, s.Node} {
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%s\t%d\t\n", m.Target, m.RPS, fmtMicros(m.P50Micros), fmtMicros(m.P99Micros), fmtMicros(m.MaxMicros), m.Errors)
	}
	tw.Flush()
	ratios := make([]string, len(r.Rounds))
	for i, rd := range r.Rounds {
		ratios[i] = fmt.Sprintf("%.3f", rd.Ratio)
	}
	fmt.Fprintf(w, "node/baseline throughput: %.3f (rounds %v)\n", s.Ratio, ratios)
	fmt.Fprintf(w, "node/baseline p99: %.2fx\n", s.P99Ratio)
}

func fmtMicros(us float64) string {
	if us >= 1000 {
		return fmt.Sprintf("%.2fms", us/1000)
	}
	return fmt.Sprintf("%.0fµs", us)
}

func (r *Report) writeJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("cannot encode results: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("cannot write results: %w", err)
	}
	return nil
}
