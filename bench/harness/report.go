package harness

import (
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"
)

// RunInfo says when and on what a benchmark ran; the commands' JSON
// reports embed it first.
type RunInfo struct {
	Started    time.Time `json:"started"`
	GoVersion  string    `json:"go_version"`
	NumCPU     int       `json:"num_cpu"`
	GOMAXPROCS int       `json:"gomaxprocs"`
}

// NewRunInfo describes a run starting now on this machine.
func NewRunInfo() RunInfo {
	return RunInfo{
		Started: time.Now().UTC(), GoVersion: runtime.Version(),
		NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
	}
}

// RunFigures are the figures of one measured load run that every command's
// JSON report shares; each command embeds them next to its own throughput
// field (requests or events per second).
type RunFigures struct {
	P50Micros  float64           `json:"p50_us"`
	P99Micros  float64           `json:"p99_us"`
	MaxMicros  float64           `json:"max_us"`
	OK         uint64            `json:"ok"`
	Errors     uint64            `json:"errors"`
	Statuses   map[string]uint64 `json:"statuses"`
	FirstError string            `json:"first_error,omitempty"`
}

// NewRunFigures takes the figures of a load run; transport errors count
// under the status "transport".
func NewRunFigures(latency *Histogram, ok, errs uint64, statuses map[int]uint64, transportErrors uint64, firstError string) RunFigures {
	f := RunFigures{
		P50Micros:  Micros(latency.Quantile(0.50)),
		P99Micros:  Micros(latency.Quantile(0.99)),
		MaxMicros:  Micros(latency.Max()),
		OK:         ok,
		Errors:     errs,
		Statuses:   make(map[string]uint64, len(statuses)),
		FirstError: firstError,
	}
	for status, n := range statuses {
		f.Statuses[strconv.Itoa(status)] = n
	}
	if transportErrors > 0 {
		f.Statuses["transport"] = transportErrors
	}
	return f
}

// MedianFigures is the median of each latency figure over items, with OK
// and Errors summed; Statuses and FirstError stay empty.
func MedianFigures[T any](items []T, pick func(T) RunFigures) RunFigures {
	var f RunFigures
	f.P50Micros = Median(items, func(it T) float64 { return pick(it).P50Micros })
	f.P99Micros = Median(items, func(it T) float64 { return pick(it).P99Micros })
	f.MaxMicros = Median(items, func(it T) float64 { return pick(it).MaxMicros })
	for _, it := range items {
		f.OK += pick(it).OK
		f.Errors += pick(it).Errors
	}
	return f
}

// Median returns the middle value over items (the mean of the two middle
// ones for an even count), or 0 for none.
func Median[T any](items []T, value func(T) float64) float64 {
	if len(items) == 0 {
		return 0
	}
	vs := make([]float64, len(items))
	for i, it := range items {
		vs[i] = value(it)
	}
	slices.Sort(vs)
	mid := len(vs) / 2
	if len(vs)%2 == 1 {
		return vs[mid]
	}
	return (vs[mid-1] + vs[mid]) / 2
}

// Ratio is a/b, or 0 when b is 0 (a run that measured nothing).
func Ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// Micros converts d to fractional microseconds, the unit of the reports.
func Micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// FormatMicros prints microseconds for a human: "850µs" or "1.25ms".
func FormatMicros(us float64) string {
	if us >= 1000 {
		return fmt.Sprintf("%.2fms", us/1000)
	}
	return fmt.Sprintf("%.0fµs", us)
}

// PrintRunLine writes the one line a command prints as soon as a run ends,
// so a long benchmark shows progress. targetWidth pads the target's name;
// errNote follows the error count.
func PrintRunLine(w io.Writer, round int, target string, targetWidth int, rate float64, unit string, f RunFigures, errNote string) {
	fmt.Fprintf(w, "  round %d %-*s %8.0f %s  p50 %s  p99 %s  max %s  errors %d%s\n",
		round, targetWidth, target, rate, unit, FormatMicros(f.P50Micros), FormatMicros(f.P99Micros), FormatMicros(f.MaxMicros), f.Errors, errNote)
}

// FiguresRow is one row of PrintFiguresTable.
type FiguresRow struct {
	Target string
	Rate   float64
	RunFigures
}

// PrintFiguresTable writes the right-aligned summary table: target, rate
// (headed by unit), p50, p99, max and errors.
func PrintFiguresTable(w io.Writer, unit string, rows ...FiguresRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "target\t%s\tp50\tp99\tmax\terrors\t\n", unit)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%s\t%d\t\n", r.Target, r.Rate, FormatMicros(r.P50Micros), FormatMicros(r.P99Micros), FormatMicros(r.MaxMicros), r.Errors)
	}
	tw.Flush()
}

// FormatRatios prints each ratio with three decimals, for a list of rounds.
func FormatRatios(ratios []float64) []string {
	out := make([]string, len(ratios))
	for i, r := range ratios {
		out[i] = fmt.Sprintf("%.3f", r)
	}
	return out
}

// WriteJSON writes v as indented JSON to path: a command's -out file.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("cannot encode results: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("cannot write results: %w", err)
	}
	return nil
}

// BinaryRevision says which commit a Go binary was built from, from the
// build info the go command stamps into it: "abc1234def0" or
// "abc1234def0+modified" (built from a tree with uncommitted changes), or
// "unknown" when the binary carries no VCS stamp.
func BinaryRevision(path string) string {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	rev, modified := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified {
		rev += "+modified"
	}
	return rev
}

// DescribeBinary names the build of a binary for a report: its VCS
// revision when stamped (see BinaryRevision), else when it was built (the
// file's modification time; builds with -buildvcs=false carry no stamp).
func DescribeBinary(path string) string {
	if rev := BinaryRevision(path); rev != "unknown" {
		return "revision " + rev
	}
	info, err := os.Stat(path)
	if err != nil {
		return "unknown build"
	}
	return "built " + info.ModTime().UTC().Format("2006-01-02 15:04 UTC")
}
