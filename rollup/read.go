package rollup

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// span is one piece of a query's hours read from rows of one tier:
// periods [lo, hi) of granularity gran.
type span struct {
	gran   byte
	lo, hi uint32
}

// coverage is how a query range maps onto the tiers.
type coverage struct {
	spans []span
	// coarse is set when part of the range is older than a finer tier's
	// retention and was read at whole days or months instead (rounded to
	// the nearer boundary): the answer covers a slightly different range.
	coarse bool
	// crossAt is the hour boundary whose crossing row an aggregate adds
	// (the range's end), or 0 when there is none to add.
	crossAt uint32
}

// tierCutoffs are the first hour and day still held by the hour and day
// tiers at now.
func (a *Aggregator) tierCutoffs(now time.Time) (hour uint32, d day) {
	return hourOf(now.Add(-a.cfg.HourRetention).UnixMilli()), dayOf(now.Add(-a.cfg.DayRetention).UnixMilli())
}

// tiers is the bucket filter of a live apply: rows older than their tier's
// retention are not written (retention would drop them at once).
func (a *Aggregator) tiers(now time.Time) bucketFilter {
	hcut, dcut := a.tierCutoffs(now)
	return func(gran byte, period uint32) bool {
		switch gran {
		case granHour, granCross:
			return period >= hcut
		case granDay:
			return period >= uint32(dcut)
		}
		return true
	}
}

// cover plans the reads of hours [h0, h1): whole UTC months from month
// rows, whole days from day rows, the ragged ends from hour rows; hours
// past the hour tier's retention from day rows, days past the day tier's
// from month rows.
func (a *Aggregator) cover(h0, h1 uint32, now time.Time) coverage {
	var cv coverage
	if h1 <= h0 {
		return cv
	}
	hcut, dcut := a.tierCutoffs(now)
	if h1 >= hcut && h1 <= hourOf(now.UnixMilli())+1 {
		cv.crossAt = h1
	}
	d0 := (h0 + 23) / 24 // first whole day
	d1 := h1 / 24        // end of the whole days
	if d0 >= d1 {
		cv.addHours(h0, h1, hcut)
		return cv
	}
	cv.addHours(h0, d0*24, hcut)
	cv.addDays(day(d0), day(d1), dcut)
	cv.addHours(d1*24, h1, hcut)
	return cv
}

// addHours reads [h0, h1) from hour rows, or the nearer whole day when the
// hours are past the hour tier.
func (cv *coverage) addHours(h0, h1, hcut uint32) {
	if h1 <= h0 {
		return
	}
	if h0 >= hcut {
		cv.spans = append(cv.spans, span{granHour, h0, h1})
		return
	}
	cv.coarse = true
	if h1-h0 >= 12 { // more than half a day: count the whole day
		d := h0 / 24
		cv.spans = append(cv.spans, span{granDay, d, d + 1})
	}
}

// addDays reads days [d0, d1): whole months from month rows, the rest from
// day rows (or the nearer month when past the day tier).
func (cv *coverage) addDays(d0, d1, dcut day) {
	m0 := monthOfDay(d0)
	if monthStart(m0) < d0 {
		m0++
	}
	m1 := monthOfDay(d1) // months [m0, m1) are whole
	if m0 >= m1 {
		cv.addDayRows(d0, d1, dcut)
		return
	}
	cv.addDayRows(d0, monthStart(m0), dcut)
	cv.spans = append(cv.spans, span{granMonth, m0, m1})
	cv.addDayRows(monthStart(m1), d1, dcut)
}

func (cv *coverage) addDayRows(d0, d1, dcut day) {
	if d1 <= d0 {
		return
	}
	if d0 >= dcut {
		cv.spans = append(cv.spans, span{granDay, uint32(d0), uint32(d1)})
		return
	}
	cv.coarse = true
	if d1-d0 >= 15 {
		m := monthOfDay(d0)
		cv.spans = append(cv.spans, span{granMonth, m, m + 1})
	}
}

// rowPrefix is tab gran period kind len entity dim.
func rowPrefix(dst []byte, tab, gran byte, period uint32, kind byte, entity string, dim string) []byte {
	dst = append(dst, tab, gran)
	dst = binary.BigEndian.AppendUint32(dst, period)
	dst = append(dst, kind, byte(len(entity)))
	dst = append(dst, entity...)
	return append(dst, dim...)
}

// dimCode is the key encoding of a dimension: its byte, or dimProp and the
// length-prefixed property name.
func dimCode(dim byte) string { return oneByte[dim] }

func propDimCode(name string) string {
	return string(append([]byte{dimProp, byte(len(name))}, name...))
}

// sumRows sums the rows of (kind, entity, dim) over hours [h0, h1) per
// value, keeping the values match accepts (nil keeps all). With cross, the
// crossing row at the range's end is added too: the visits still going
// there, which an aggregate counts (see folder.change).
func (a *Aggregator) sumRows(kind byte, entity, dim string, h0, h1 uint32, cross bool, match func(string) bool) (map[string]*counters, bool, error) {
	cv := a.cover(h0, h1, a.cfg.Now())
	spans := cv.spans
	if cross && cv.crossAt != 0 {
		spans = append(spans[:len(spans):len(spans)], span{granCross, cv.crossAt, cv.crossAt + 1})
	}
	out := make(map[string]*counters)
	it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tabRows}, UpperBound: []byte{tabRows + 1}})
	if err != nil {
		return nil, false, fmt.Errorf("cannot read rollups: %w", err)
	}
	defer it.Close()
	var kb []byte
	for _, s := range spans {
		for p := s.lo; p < s.hi; p++ {
			kb = rowPrefix(kb[:0], tabRows, s.gran, p, kind, entity, dim)
			if !it.SeekGE(kb) || !bytes.Equal(it.Key(), kb) {
				continue
			}
			v, err := it.ValueAndErr()
			if err != nil {
				return nil, false, fmt.Errorf("cannot read rollup %x: %w", kb, err)
			}
			err = forEachRow(v, func(value []byte, c *counters) error {
				if match != nil && !match(string(value)) {
					return nil
				}
				sum := out[string(value)]
				if sum == nil {
					sum = new(counters)
					out[string(value)] = sum
				}
				sum.add(c)
				return nil
			})
			if err != nil {
				return nil, false, fmt.Errorf("cannot read rollup %x: %w", kb, err)
			}
		}
	}
	return out, cv.coarse, it.Error()
}

// visitorSets unions the visitor sets of (kind, entity, dim) over hours
// [h0, h1) per value (or of every matching value into one, under "", when
// mergeAll is set).
func (a *Aggregator) visitorSets(kind byte, entity, dim string, h0, h1 uint32, match func(string) bool, mergeAll bool) (map[string]*visitorSet, error) {
	cv := a.cover(h0, h1, a.cfg.Now())
	out := make(map[string]*visitorSet)
	a.sketches.gate.RLock()
	defer a.sketches.gate.RUnlock()
	it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tabSketch}, UpperBound: []byte{tabSketch + 1}})
	if err != nil {
		return nil, fmt.Errorf("cannot read sketches: %w", err)
	}
	defer it.Close()
	var kb []byte
	for _, s := range cv.spans {
		for p := s.lo; p < s.hi; p++ {
			kb = rowPrefix(kb[:0], tabSketch, s.gran, p, kind, entity, dim)
			for ok := it.SeekGE(kb); ok && bytes.HasPrefix(it.Key(), kb); ok = it.Next() {
				value := string(it.Key()[len(kb):])
				if match != nil && !match(value) {
					continue
				}
				v, err := it.ValueAndErr()
				if err != nil {
					return nil, fmt.Errorf("cannot read sketch: %w", err)
				}
				e, err := a.sketches.get(it.Key(), v)
				if err != nil {
					return nil, fmt.Errorf("cannot decode sketch %x: %w", it.Key(), err)
				}
				if mergeAll {
					value = ""
				}
				acc := out[value]
				if acc == nil {
					acc = new(visitorSet)
					out[value] = acc
				}
				if err := acc.merge(&e.set); err != nil {
					return nil, err
				}
			}
		}
	}
	return out, it.Error()
}

// bucketVisitors is the visitor estimate of (kind, entity, dim, value)
// over hours [h0, h1); a single finished bucket answers from the cached
// estimate without merging.
func (a *Aggregator) bucketVisitors(kind byte, entity, dim, value string, h0, h1 uint32) (uint64, error) {
	sets, err := a.visitorSets(kind, entity, dim, h0, h1, func(v string) bool { return v == value }, true)
	if err != nil {
		return 0, err
	}
	return estimateOf(sets[""]), nil
}

func estimateOf(s *visitorSet) uint64 {
	if s == nil {
		return 0
	}
	return s.estimate()
}
