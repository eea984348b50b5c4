package rollup

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
)

// hoursOf returns the UTC hour numbers [h0, h1) that cover r.
func hoursOf(r query.Range) (uint32, uint32) {
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

// rows sums the rows of (kind, entity, dim) over r per value; see sumRows.
func (a *Aggregator) rows(kind byte, entity string, dim byte, r query.Range, cross bool, match func(string) bool) (map[string]*counters, error) {
	h0, h1 := hoursOf(r)
	m, _, err := a.sumRows(kind, entity, dimCode(dim), h0, h1, cross, match)
	return m, err
}

// sets unions the visitor sets of (kind, entity, dim) over r; see
// visitorSets.
func (a *Aggregator) sets(kind byte, entity string, dim byte, r query.Range, match func(string) bool, mergeAll bool) (map[string]*visitorAcc, error) {
	h0, h1 := hoursOf(r)
	return a.visitorSets(kind, entity, dimCode(dim), h0, h1, match, mergeAll)
}

// setsOf unions the visitor sets of a few values of (kind, entity, dim)
// over r; see visitorSetsOf.
func (a *Aggregator) setsOf(kind byte, entity string, dim byte, r query.Range, values []string) (map[string]*visitorAcc, error) {
	h0, h1 := hoursOf(r)
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
