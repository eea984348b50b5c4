package harness

import (
	"math"
	"math/bits"
	"time"
)

// Histogram layout: values below 2*histSub nanoseconds get one bucket each;
// above that, every power of two is split into histSub linear buckets, so a
// bucket is never wider than 1/histSub (1.6 %) of the values it holds. The
// array covers the whole uint64 range, so Record never branches on overflow.
const (
	histSubBits = 6
	histSub     = 1 << histSubBits // linear sub-buckets per power of two
	histBuckets = histSub*(64-histSubBits) + histSub
)

// Histogram records durations without allocating. It is not safe for
// concurrent use: give each worker its own and Merge them afterwards.
type Histogram struct {
	counts [histBuckets]uint64
	count  uint64
	sum    uint64 // nanoseconds; wraps only after 584 years of latency
	min    uint64
	max    uint64
}

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram {
	return &Histogram{min: math.MaxUint64}
}

// bucketIndex maps a value in nanoseconds to its bucket.
func bucketIndex(v uint64) int {
	if v < 2*histSub {
		return int(v)
	}
	shift := bits.Len64(v) - (histSubBits + 1)
	return histSub*shift + int(v>>uint(shift))
}

// bucketUpper returns the largest value that lands in bucket i.
func bucketUpper(i int) uint64 {
	if i < 2*histSub {
		return uint64(i)
	}
	shift := i/histSub - 1
	mantissa := uint64(i - histSub*shift)
	return (mantissa+1)<<uint(shift) - 1
}

// Record adds one observation. Negative durations count as zero.
func (h *Histogram) Record(d time.Duration) {
	v := uint64(0)
	if d > 0 {
		v = uint64(d)
	}
	h.counts[bucketIndex(v)]++
	h.count++
	h.sum += v
	if v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
}

// Merge adds every observation of o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.count == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.count += o.count
	h.sum += o.sum
	h.min = min(h.min, o.min)
	h.max = max(h.max, o.max)
}

// Count returns the number of observations.
func (h *Histogram) Count() uint64 { return h.count }

// Min returns the smallest observation, or 0 when empty.
func (h *Histogram) Min() time.Duration {
	if h.count == 0 {
		return 0
	}
	return time.Duration(h.min)
}

// Max returns the largest observation, or 0 when empty.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Mean returns the arithmetic mean, or 0 when empty.
func (h *Histogram) Mean() time.Duration {
	if h.count == 0 {
		return 0
	}
	return time.Duration(h.sum / h.count)
}

// Quantile returns the value at quantile q (0..1): the upper edge of the
// bucket holding the ceil(q*count)-th smallest observation, clamped to the
// observed min and max. Reporting the upper edge errs on the slow side by at
// most one bucket width.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.count == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := uint64(math.Ceil(q * float64(h.count)))
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			v := min(max(bucketUpper(i), h.min), h.max)
			return time.Duration(v)
		}
	}
	return time.Duration(h.max) // unreachable while counts and count agree
}
