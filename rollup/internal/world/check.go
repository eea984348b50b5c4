package world

import (
	"math"
	"testing"
	"time"
)

// HLLBound is the error the tests allow an estimate of n: three standard
// errors of a precision-14 sketch (3 * 1.04 / sqrt(2^14) = 2.44 %), and at
// least 1 for tiny n.
func HLLBound(n int64) float64 { return math.Max(3*1.04/math.Sqrt(1<<SketchPrecision)*float64(n), 1) }

// WantEstimate fails t unless got is within HLLBound of want.
func WantEstimate(t testing.TB, what string, got uint64, want int64) {
	t.Helper()
	if d := math.Abs(float64(got) - float64(want)); d > HLLBound(want) {
		t.Errorf("%s: got %d; want %d within %.1f", what, got, want, HLLBound(want))
	}
}

// WantEqual fails t unless got == want.
func WantEqual[T comparable](t testing.TB, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s: got %v; want %v", what, got, want)
	}
}

// MustLoc loads a time zone or fails t.
func MustLoc(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("LoadLocation(%q): %v", name, err)
	}
	return loc
}
