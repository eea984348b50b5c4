package rollup

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/waymark/waymark/ingest"
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

// rows sums the rows of (kind, entity, dim) over r per value; see sumRows.
func (a *Aggregator) rows(kind byte, entity string, dim byte, r Range, cross bool, match func(string) bool) (map[string]*counters, error) {
	h0, h1 := r.hours()
	m, _, err := a.sumRows(kind, entity, dimCode(dim), h0, h1, cross, match)
	return m, err
}

// sets unions the visitor sets of (kind, entity, dim) over r; see
// visitorSets.
func (a *Aggregator) sets(kind byte, entity string, dim byte, r Range, match func(string) bool, mergeAll bool) (map[string]*visitorAcc, error) {
	h0, h1 := r.hours()
	return a.visitorSets(kind, entity, dimCode(dim), h0, h1, match, mergeAll)
}

// setsOf unions the visitor sets of a few values of (kind, entity, dim)
// over r; see visitorSetsOf.
func (a *Aggregator) setsOf(kind byte, entity string, dim byte, r Range, values []string) (map[string]*visitorAcc, error) {
	h0, h1 := r.hours()
	return a.visitorSetsOf(kind, entity, dimCode(dim), h0, h1, values)
}

// round2 rounds to two decimals, half to even, as ClickHouse's round on
// a Float64 does for Plausible.
func round2(v float64) float64 { return math.RoundToEven(v*100) / 100 }

// roundEven rounds to an integer, half to even.
func roundEven(v float64) float64 { return math.RoundToEven(v) }

func ratio(num, den int64) float64 {
	if den == 0 {
		return 0
	}
	return float64(num) / float64(den)
}

// sortByCount orders breakdown rows by count, then value. The keys are
// taken once per row: a comparison that called count and value on copies
// of its arguments would move both to the heap, twice per comparison.
func sortByCount[T any](rows []T, count func(*T) int64, value func(*T) string) {
	type sortKey struct {
		count int64
		value string
		i     int
	}
	keys := make([]sortKey, len(rows))
	for i := range rows {
		keys[i] = sortKey{count(&rows[i]), value(&rows[i]), i}
	}
	slices.SortFunc(keys, func(x, y sortKey) int {
		if x.count != y.count {
			if x.count > y.count {
				return -1
			}
			return 1
		}
		return strings.Compare(x.value, y.value)
	})
	sorted := make([]T, len(rows))
	for j, k := range keys {
		sorted[j] = rows[k.i]
	}
	copy(rows, sorted)
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

// realtimeScan calls fn for every stored event newer than since (the raw
// blocks of the days since touches whose last event is not older).
func (a *Aggregator) realtimeScan(since time.Time, fn func(ev *ingest.Event) error) error {
	ms := since.UnixMilli()
	it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: dayPrefix(tabEvent, dayOf(ms)), UpperBound: []byte{tabEvent + 1}})
	if err != nil {
		return fmt.Errorf("cannot read raw events: %w", err)
	}
	defer it.Close()
	var ev ingest.Event
	for it.First(); it.Valid(); it.Next() {
		_, _, last, err := blockSpan(it.Key(), it.Value())
		if err != nil {
			return err
		}
		if last < ms {
			continue
		}
		err = forEachInBlock(it.Key(), it.Value(), &ev, func(ev *ingest.Event) error {
			if ev.Time < ms {
				return nil
			}
			return fn(ev)
		})
		if err != nil {
			return err
		}
	}
	return it.Error()
}
