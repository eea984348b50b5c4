package harness

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{0.8}, 0.8},
		{[]float64{0.95, 0.7, 0.9}, 0.9},
		{[]float64{1, 0.5, 0.7, 0.9}, 0.8},
	}
	for _, tt := range tests {
		if got := Median(tt.in, func(v float64) float64 { return v }); got != tt.want {
			t.Errorf("Median(%v) = %v; want %v", tt.in, got, tt.want)
		}
	}
}

func TestMedianFigures(t *testing.T) {
	runs := []RunFigures{
		{P50Micros: 10, P99Micros: 100, MaxMicros: 1000, OK: 5, Errors: 1},
		{P50Micros: 30, P99Micros: 300, MaxMicros: 3000, OK: 7},
		{P50Micros: 20, P99Micros: 200, MaxMicros: 2000, OK: 9, Errors: 2},
	}
	got := MedianFigures(runs, func(f RunFigures) RunFigures { return f })
	if got.P50Micros != 20 || got.P99Micros != 200 || got.MaxMicros != 2000 || got.OK != 21 || got.Errors != 3 {
		t.Errorf("MedianFigures = %+v; want medians 20/200/2000 and sums 21 ok, 3 errors", got)
	}
}

func TestNewRunFigures(t *testing.T) {
	h := NewHistogram()
	h.Record(2 * time.Millisecond)
	f := NewRunFigures(h, 1, 3, map[int]uint64{200: 1, 503: 2}, 1, "boom")
	if f.Statuses["200"] != 1 || f.Statuses["503"] != 2 || f.Statuses["transport"] != 1 {
		t.Errorf("statuses = %v; want 200:1 503:2 transport:1", f.Statuses)
	}
	if f.P50Micros < 1900 || f.P50Micros > 2100 || f.FirstError != "boom" {
		t.Errorf("figures = %+v; want p50 about 2000µs and first error boom", f)
	}
}

func TestFormatMicros(t *testing.T) {
	for us, want := range map[float64]string{850: "850µs", 1250: "1.25ms"} {
		if got := FormatMicros(us); got != want {
			t.Errorf("FormatMicros(%v) = %q; want %q", us, got, want)
		}
	}
}

func TestRunPairAlternates(t *testing.T) {
	var got []int
	for r := range 2 {
		if err := RunPair(r, func(side int) error { got = append(got, side); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if want := []int{0, 1, 1, 0}; !slices.Equal(got, want) {
		t.Errorf("order = %v; want %v", got, want)
	}
}

func TestPrintFiguresTable(t *testing.T) {
	var buf bytes.Buffer
	PrintFiguresTable(&buf, "req/s", FiguresRow{Target: "node", Rate: 1234, RunFigures: RunFigures{P50Micros: 90, Errors: 2}})
	for _, want := range []string{"req/s", "node", "1234", "90µs", "2"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
}
