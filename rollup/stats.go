package rollup

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/axiomhq/hyperloglog"
	"github.com/cockroachdb/pebble/v2"
)

// ErrUnsupportedQuery is returned for a query that cannot be answered: an
// unknown dimension or operator, or a raw-event query (filters on several
// dimensions) over a range holding too many events.
var ErrUnsupportedQuery = errors.New("unsupported query")

// Granularity of a time series.
type Granularity string

// Granularities. Buckets start at the zone's midnight (day), Monday
// (week) and first of the month (month).
const (
	Hour  Granularity = "hour"
	Day   Granularity = "day"
	Week  Granularity = "week"
	Month Granularity = "month"
)

// Range is a half-open interval of instants; Loc is the zone whose day,
// week and month boundaries series use. Rollups are hourly, so the range
// is read at whole UTC hours: From rounded down, To rounded up. A zone
// whose offset is not a whole number of hours (India, Nepal) therefore has
// its day boundaries moved to the UTC hour before.
type Range struct {
	From, To time.Time
	Loc      *time.Location
}

func (r Range) loc() *time.Location {
	if r.Loc == nil {
		return time.UTC
	}
	return r.Loc
}

// hours returns the UTC hour numbers [h0, h1) that cover r.
func (r Range) hours() (uint32, uint32) {
	from, to := r.From.UnixMilli(), r.To.UnixMilli()
	if to <= from {
		return 0, 0
	}
	h1 := to / msPerHour
	if to%msPerHour != 0 {
		h1++
	}
	return hourOf(from), uint32(h1)
}

// buckets splits r into the series buckets of g in r's zone.
func (r Range) buckets(g Granularity) ([]Range, error) {
	loc := r.loc()
	var out []Range
	start := r.From.In(loc)
	switch g {
	case Hour:
		start = start.Truncate(time.Hour)
	case Day:
		start = time.Date(start.Year(), start.Month(), start.Day(), 0, 0, 0, 0, loc)
	case Week:
		start = time.Date(start.Year(), start.Month(), start.Day(), 0, 0, 0, 0, loc)
		start = start.AddDate(0, 0, -((int(start.Weekday()) + 6) % 7))
	case Month:
		start = time.Date(start.Year(), start.Month(), 1, 0, 0, 0, 0, loc)
	default:
		return nil, fmt.Errorf("%w: granularity %q", ErrUnsupportedQuery, g)
	}
	for t := start; t.Before(r.To); {
		var next time.Time
		switch g {
		case Hour:
			next = t.Add(time.Hour)
		case Day:
			next = t.AddDate(0, 0, 1)
		case Week:
			next = t.AddDate(0, 0, 7)
		case Month:
			next = t.AddDate(0, 1, 0)
		}
		if len(out) >= 10000 {
			return nil, fmt.Errorf("%w: more than 10000 buckets", ErrUnsupportedQuery)
		}
		out = append(out, Range{From: t, To: next, Loc: loc})
		t = next
	}
	return out, nil
}

// span is one piece of an hour range read from rows of one granularity.
type span struct {
	gran   byte
	lo, hi uint32 // bucket bounds
}

// plan covers hours [h0, h1) with whole UTC days from the day rows and
// the rest from the hour rows.
func plan(h0, h1 uint32) []span {
	if h1 <= h0 {
		return nil
	}
	d0 := (h0 + 23) / 24 * 24 // first day start at or after h0
	d1 := h1 / 24 * 24        // last day start at or before h1
	if d0 >= d1 {
		return []span{{granHour, h0, h1}}
	}
	var out []span
	if h0 < d0 {
		out = append(out, span{granHour, h0, d0})
	}
	out = append(out, span{granDay, d0, d1})
	if d1 < h1 {
		out = append(out, span{granHour, d1, h1})
	}
	return out
}

// scanRows calls fn for every row of (kind, entity, dim) in hours
// [h0, h1), with its value.
func (a *Aggregator) scanRows(tab, kind byte, entity string, dim byte, h0, h1 uint32, fn func(value string, v []byte) error) error {
	for _, s := range plan(h0, h1) {
		p := appendRollupPrefix(nil, tab, kind, entity, dim, s.gran)
		lo := append(append([]byte(nil), p...), be32(s.lo)...)
		hi := append(append([]byte(nil), p...), be32(s.hi)...)
		it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return fmt.Errorf("cannot read rollups: %w", err)
		}
		for it.First(); it.Valid(); it.Next() {
			if err := fn(string(it.Key()[len(p)+4:]), it.Value()); err != nil {
				it.Close()
				return err
			}
		}
		if err := it.Close(); err != nil {
			return fmt.Errorf("cannot read rollups: %w", err)
		}
	}
	return nil
}

func be32(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }

// sumRows sums the rows of (kind, entity, dim) in r per value, keeping the
// values match accepts (nil keeps all).
func (a *Aggregator) sumRows(kind byte, entity string, dim byte, r Range, match func(string) bool) (map[string]*counters, error) {
	h0, h1 := r.hours()
	out := make(map[string]*counters)
	var c counters
	err := a.scanRows(tabRollup, kind, entity, dim, h0, h1, func(value string, v []byte) error {
		if match != nil && !match(value) {
			return nil
		}
		if err := decodeCounters(v, &c); err != nil {
			return err
		}
		sum := out[value]
		if sum == nil {
			sum = new(counters)
			out[value] = sum
		}
		sum.add(&c)
		return nil
	})
	return out, err
}

// visitorSketches merges the sketches of (kind, entity, dim) in r per
// value (or all matching values into one when merged is set, under "").
func (a *Aggregator) visitorSketches(kind byte, entity string, dim byte, r Range, match func(string) bool, mergeAll bool) (map[string]*hyperloglog.Sketch, error) {
	h0, h1 := r.hours()
	out := make(map[string]*hyperloglog.Sketch)
	err := a.scanRows(tabSketch, kind, entity, dim, h0, h1, func(value string, v []byte) error {
		if match != nil && !match(value) {
			return nil
		}
		if mergeAll {
			value = ""
		}
		var sk hyperloglog.Sketch
		if err := sk.UnmarshalBinary(v); err != nil {
			return fmt.Errorf("cannot decode sketch: %w", err)
		}
		cur := out[value]
		if cur == nil {
			out[value] = &sk
			return nil
		}
		return cur.Merge(&sk)
	})
	return out, err
}

func estimate(sk *hyperloglog.Sketch) uint64 {
	if sk == nil {
		return 0
	}
	return sk.Estimate()
}

// round2 rounds to two decimals, as every average the API returns.
func round2(v float64) float64 { return math.Round(v*100) / 100 }

func ratio(num, den int64) float64 {
	if den == 0 {
		return 0
	}
	return float64(num) / float64(den)
}

// sortRows orders breakdown rows by count, then value.
func sortByCount[T any](rows []T, count func(*T) int64, value func(*T) string) {
	slices.SortFunc(rows, func(x, y T) int {
		if cx, cy := count(&x), count(&y); cx != cy {
			if cx > cy {
				return -1
			}
			return 1
		}
		return strings.Compare(value(&x), value(&y))
	})
}

// checkRange refuses ranges that are empty or absurdly long.
func checkRange(r Range) error {
	if !r.To.After(r.From) {
		return fmt.Errorf("%w: empty time range", ErrUnsupportedQuery)
	}
	if r.To.Sub(r.From) > 3700*24*time.Hour {
		return fmt.Errorf("%w: time range longer than ten years", ErrUnsupportedQuery)
	}
	return nil
}

// realtimeScan calls fn for every stored event newer than since, oldest
// first (the raw events of the days since touches).
func (a *Aggregator) realtimeScan(since time.Time, fn func(evTime int64, raw []byte) error) error {
	ms := since.UnixMilli()
	lo := appendEventKey(nil, dayOf(ms), ms, &[16]byte{})
	it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: []byte{tabEvent + 1}})
	if err != nil {
		return fmt.Errorf("cannot read raw events: %w", err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) < 13 {
			continue
		}
		t := int64(uint64(k[5])<<56 | uint64(k[6])<<48 | uint64(k[7])<<40 | uint64(k[8])<<32 |
			uint64(k[9])<<24 | uint64(k[10])<<16 | uint64(k[11])<<8 | uint64(k[12]))
		if t < ms {
			continue
		}
		if err := fn(t, it.Value()); err != nil {
			return err
		}
	}
	return it.Error()
}
