package query

import (
	"errors"
	"fmt"
	"time"
)

// ErrClosed is returned by every method of a backend (and of the
// aggregator) called after Close.
var ErrClosed = errors.New("aggregator closed")

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

// Location is Loc, UTC when it is nil.
func (r Range) Location() *time.Location {
	if r.Loc == nil {
		return time.UTC
	}
	return r.Loc
}

// Buckets splits r into the series buckets of g in r's zone: the first
// starts at or before From, the last ends at or after To (callers clip
// them), at most 10000 of them.
func (r Range) Buckets(g Granularity) ([]Range, error) {
	loc := r.Location()
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

// CheckRange refuses ranges that are empty or absurdly long (over ten
// years) with ErrUnsupportedQuery.
func CheckRange(r Range) error {
	if !r.To.After(r.From) {
		return fmt.Errorf("%w: empty time range", ErrUnsupportedQuery)
	}
	if r.To.Sub(r.From) > 3700*24*time.Hour {
		return fmt.Errorf("%w: time range longer than ten years", ErrUnsupportedQuery)
	}
	return nil
}
