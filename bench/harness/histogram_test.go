package harness

import (
	"math"
	"testing"
	"time"
)

func TestBucketIndexRoundTrip(t *testing.T) {
	// Every value must land in a bucket whose upper edge is >= the value and
	// whose width is at most 1/histSub of the value.
	values := []uint64{0, 1, 63, 64, 127, 128, 129, 255, 256, 1000, 999_999, 1 << 40, math.MaxUint64}
	for v := uint64(1); v < 1<<20; v = v*3 + 1 {
		values = append(values, v)
	}
	for _, v := range values {
		i := bucketIndex(v)
		if i < 0 || i >= histBuckets {
			t.Fatalf("bucketIndex(%d) = %d; want in [0,%d)", v, i, histBuckets)
		}
		upper := bucketUpper(i)
		if upper < v {
			t.Errorf("bucketUpper(bucketIndex(%d)) = %d; want >= %d", v, upper, v)
		}
		if i > 0 && bucketUpper(i-1) >= v {
			t.Errorf("value %d also fits bucket %d (upper %d)", v, i-1, bucketUpper(i-1))
		}
		if width := upper - v; v >= 2*histSub && float64(width) > float64(v)/histSub {
			t.Errorf("bucket of %d is %d wide; want <= %d", v, width, v/histSub)
		}
	}
}

func TestHistogramQuantiles(t *testing.T) {
	h := NewHistogram()
	// 1..10000 microseconds, each once.
	for i := 1; i <= 10000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	tests := []struct {
		q    float64
		want time.Duration
	}{
		{0, time.Microsecond},
		{0.5, 5000 * time.Microsecond},
		{0.9, 9000 * time.Microsecond},
		{0.99, 9900 * time.Microsecond},
		{0.999, 9990 * time.Microsecond},
		{1, 10000 * time.Microsecond},
	}
	for _, tt := range tests {
		got := h.Quantile(tt.q)
		if got < tt.want || float64(got-tt.want) > float64(tt.want)/histSub {
			t.Errorf("Quantile(%v) = %v; want %v (+%.1f%%)", tt.q, got, tt.want, 100.0/histSub)
		}
	}
	if got, want := h.Count(), uint64(10000); got != want {
		t.Errorf("Count() = %d; want %d", got, want)
	}
	if got, want := h.Min(), time.Microsecond; got != want {
		t.Errorf("Min() = %v; want %v", got, want)
	}
	if got, want := h.Max(), 10*time.Millisecond; got != want {
		t.Errorf("Max() = %v; want %v", got, want)
	}
	if got, want := h.Mean(), 5000500*time.Nanosecond; got != want {
		t.Errorf("Mean() = %v; want %v", got, want)
	}
}

func TestHistogramSmallValuesAreExact(t *testing.T) {
	h := NewHistogram()
	for _, v := range []time.Duration{3, 3, 3, 7, 100} {
		h.Record(v)
	}
	if got, want := h.Quantile(0.5), time.Duration(3); got != want {
		t.Errorf("Quantile(0.5) = %v; want %v", got, want)
	}
	if got, want := h.Quantile(0.8), time.Duration(7); got != want {
		t.Errorf("Quantile(0.8) = %v; want %v", got, want)
	}
	if got, want := h.Quantile(0.99), time.Duration(100); got != want {
		t.Errorf("Quantile(0.99) = %v; want %v", got, want)
	}
}

func TestHistogramMergeAndEmpty(t *testing.T) {
	a, b, empty := NewHistogram(), NewHistogram(), NewHistogram()
	if got := empty.Quantile(0.99); got != 0 {
		t.Errorf("empty Quantile(0.99) = %v; want 0", got)
	}
	if got := empty.Min(); got != 0 {
		t.Errorf("empty Min() = %v; want 0", got)
	}
	a.Record(time.Millisecond)
	b.Record(3 * time.Millisecond)
	b.Record(-time.Second) // clamped to zero
	a.Merge(b)
	a.Merge(empty)
	if got, want := a.Count(), uint64(3); got != want {
		t.Errorf("Count() = %d; want %d", got, want)
	}
	if got, want := a.Min(), time.Duration(0); got != want {
		t.Errorf("Min() = %v; want %v", got, want)
	}
	if got, want := a.Max(), 3*time.Millisecond; got != want {
		t.Errorf("Max() = %v; want %v", got, want)
	}
}

func BenchmarkHistogramRecord(b *testing.B) {
	b.ReportAllocs()
	h := NewHistogram()
	d := 137 * time.Microsecond
	for i := 0; b.Loop(); i++ {
		h.Record(d + time.Duration(i&1023))
	}
}
