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
			return period >= uint32(dcut) && a.daySealed(period)
		case granMonth:
			return a.monthSealed(period)
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
	if h1 < h0 {
		return cv
	}
	hcut, dcut := a.tierCutoffs(now)
	if h1 >= hcut && h1 <= hourOf(now.UnixMilli())+1 {
		cv.crossAt = h1
	}
	if h1 == h0 {
		return cv // the crossing row alone
	}
	d0 := (h0 + 23) / 24 // first whole day
	d1 := h1 / 24        // end of the whole days
	if d0 >= d1 {
		cv.addHours(h0, h1, hcut)
		return cv
	}
	// Days not sealed yet (today, and yesterday for a moment after
	// midnight) are read from their hours.
	ds := max(d0, min(d1, a.sealedDay.Load()))
	cv.addHours(h0, d0*24, hcut)
	cv.addDays(day(d0), day(ds), dcut, a.sealed.Load())
	cv.addHours(ds*24, h1, hcut)
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

// addDays reads days [d0, d1): whole sealed months from month rows, the
// rest from day rows (or the nearer month when past the day tier).
func (cv *coverage) addDays(d0, d1, dcut day, sealed uint32) {
	m0 := monthOfDay(d0)
	if monthStart(m0) < d0 {
		m0++
	}
	m1 := min(monthOfDay(d1), max(sealed, m0)) // months [m0, m1) are whole and sealed
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

// rowPrefix is tab gran period kind len entity dim: with dim "", the key
// of an entity's rowset or sketch set in one bucket.
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
	var slab []counters // the sums, allocated a run at a time
	rr := a.newRowReader()
	defer rr.close()
	var kb []byte
	for _, s := range spans {
		for p := s.lo; p < s.hi; p++ {
			kb = rowPrefix(kb[:0], tabRows, s.gran, p, kind, entity, "")
			v, err := rr.get(kb)
			if err != nil {
				return nil, false, err
			}
			if v == nil {
				continue
			}
			err = forEachRowPrefix(v, []byte(dim), func(comp []byte, c *counters) error {
				value := comp[len(dim):]
				if match != nil && !match(string(value)) {
					return nil
				}
				sum := out[string(value)]
				if sum == nil {
					if len(slab) == cap(slab) {
						slab = make([]counters, 0, min(max(16, 2*cap(slab)), 1024))
					}
					slab = slab[:len(slab)+1]
					sum = &slab[len(slab)-1]
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
	return out, cv.coarse, nil
}

// rowReader reads merged rowsets by key: finished buckets from the row
// cache, the rest (and misses) from one Pebble iterator, opened at the
// first miss, whose finished rowsets are then cached. It holds the cache's
// gate shared from its first read to close, as readSets does, so that a
// batch that changes cached rowsets commits and drops them while no
// reader is between the cache and its iterator: an answer is of one
// state, before the batch or after it.
type rowReader struct {
	a      *Aggregator
	it     *pebble.Iterator
	seq    uint64
	locked bool
}

func (a *Aggregator) newRowReader() rowReader { return rowReader{a: a} }

// get returns the rowset under key, nil when there is none. The bytes are
// valid until the next get or close.
func (r *rowReader) get(key []byte) ([]byte, error) {
	c := r.a.sketches
	if !r.locked {
		c.gate.RLock()
		r.locked = true
	}
	if v, ok := c.getRow(key); ok {
		return v, nil
	}
	if r.it == nil {
		r.seq = c.rowSeq()
		it, err := r.a.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tabRows}, UpperBound: []byte{tabRows + 1}})
		if err != nil {
			return nil, fmt.Errorf("cannot read rollups: %w", err)
		}
		r.it = it
	}
	if !r.it.SeekGE(key) || !bytes.Equal(r.it.Key(), key) {
		if err := r.it.Error(); err != nil {
			return nil, fmt.Errorf("cannot read rollups: %w", err)
		}
		return nil, nil
	}
	v, err := r.it.ValueAndErr()
	if err != nil {
		return nil, fmt.Errorf("cannot read rollup %x: %w", key, err)
	}
	c.putRow(key, v, r.seq)
	return v, nil
}

func (r *rowReader) close() {
	if r.it != nil {
		r.it.Close()
		r.it = nil
	}
	if r.locked {
		r.a.sketches.gate.RUnlock()
		r.locked = false
	}
}

// visitorAcc unions visitor sets lazily: a single set (one finished
// bucket) answers with its cached estimate, merging starts with the second.
type visitorAcc struct {
	set visitorSet
	n   int
	one *cachedSet
}

func (v *visitorAcc) add(e *cachedSet) error {
	v.n++
	switch v.n {
	case 1:
		v.one = e
		return nil
	case 2:
		if err := v.set.merge(&v.one.set); err != nil {
			return err
		}
		v.one = nil
	}
	return v.set.merge(&e.set)
}

// addAcc unions another accumulator into v.
func (v *visitorAcc) addAcc(o *visitorAcc) error {
	if o.n == 1 {
		return v.add(o.one)
	}
	if o.n == 0 {
		return nil
	}
	return v.add(&cachedSet{set: o.set})
}

// estimate is the number of distinct visitors.
func (v *visitorAcc) estimate() uint64 {
	switch {
	case v == nil || v.n == 0:
		return 0
	case v.n == 1:
		return v.one.estimate
	}
	return v.set.estimate()
}

func estimateOf(v *visitorAcc) uint64 { return v.estimate() }

// visitorSets unions the visitor sets of (kind, entity, dim) over hours
// [h0, h1) per value (or of every matching value into one, under "", when
// mergeAll is set).
func (a *Aggregator) visitorSets(kind byte, entity, dim string, h0, h1 uint32, match func(string) bool, mergeAll bool) (map[string]*visitorAcc, error) {
	return a.readSets(kind, entity, dim, h0, h1, match, nil, mergeAll)
}

// visitorSetsOf is visitorSets for a few known values: point reads of
// each value in each bucket instead of scanning every value (a breakdown's
// top rows out of thousands of pages). The part of the range that ended an
// hour ago is answered from the range cache: a merged set per value and
// exact range, so a repeated 30-day query (or a daily series in a zone
// whose days are not UTC days, each day merging 24 hour sketches) merges
// only the live part.
func (a *Aggregator) visitorSetsOf(kind byte, entity, dim string, h0, h1 uint32, values []string) (map[string]*visitorAcc, error) {
	hc := min(h1, max(h0, finishedHour(a.cfg.Now())))
	out := make(map[string]*visitorAcc, len(values))
	for _, v := range values {
		acc := new(visitorAcc)
		if h0 < hc {
			e, err := a.rangeSet(kind, entity, dim, v, h0, hc)
			if err != nil {
				return nil, err
			}
			if e != nil {
				if err := acc.add(e); err != nil {
					return nil, err
				}
			}
		}
		if hc < h1 {
			live, err := a.readSets(kind, entity, dim, hc, h1, nil, []string{v}, false)
			if err != nil {
				return nil, err
			}
			if l := live[v]; l != nil {
				if err := acc.addAcc(l); err != nil {
					return nil, err
				}
			}
		}
		out[v] = acc
	}
	return out, nil
}

// finishedHour is the first hour whose buckets may still change often:
// buckets before it ended at least an hour ago.
func finishedHour(now time.Time) uint32 { return max(hourOf(now.UnixMilli()), 1) - 1 }

// rangeSet is the merged visitor set of one value over finished hours
// [h0, h1), from the range cache or read and cached; nil when there is
// none.
func (a *Aggregator) rangeSet(kind byte, entity, dim, value string, h0, h1 uint32) (*cachedSet, error) {
	key := rangeKey(kind, entity, dim, value, h0, h1)
	if e := a.sketches.getRange(key); e != nil {
		return e, nil
	}
	gen := a.sketches.generation()
	sets, err := a.readSets(kind, entity, dim, h0, h1, nil, []string{value}, false)
	if err != nil {
		return nil, err
	}
	acc := sets[value]
	if acc == nil {
		acc = new(visitorAcc)
	}
	e := acc.one
	if acc.n != 1 {
		acc.set.compact()
		e = &cachedSet{set: acc.set, estimate: acc.set.estimate()}
		e.size = 64 + len(key) + 8*len(acc.set.hashes)
		if acc.set.sk != nil {
			e.size += 1 << sketchPrecision
		}
	}
	a.sketches.putRange(key, e, gen)
	return e, nil
}

func rangeKey(kind byte, entity, dim, value string, h0, h1 uint32) string {
	b := rowPrefix(nil, 'r', 0, h0, kind, entity, dim)
	b = binary.BigEndian.AppendUint32(b, h1)
	return string(append(b, value...))
}

func (a *Aggregator) readSets(kind byte, entity, dim string, h0, h1 uint32, match func(string) bool, values []string, mergeAll bool) (map[string]*visitorAcc, error) {
	cv := a.cover(h0, h1, a.cfg.Now())
	out := make(map[string]*visitorAcc)
	a.sketches.gate.RLock()
	defer a.sketches.gate.RUnlock()
	it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tabSketch}, UpperBound: []byte{tabSketch + 1}})
	if err != nil {
		return nil, fmt.Errorf("cannot read sketches: %w", err)
	}
	defer it.Close()
	var want map[string]bool
	if values != nil {
		want = make(map[string]bool, len(values))
		for _, v := range values {
			want[v] = true
		}
	}
	var kb, full []byte
	for _, s := range cv.spans {
		for p := s.lo; p < s.hi; p++ {
			kb = rowPrefix(kb[:0], tabSketch, s.gran, p, kind, entity, "")
			if !it.SeekGE(kb) || !bytes.Equal(it.Key(), kb) {
				continue
			}
			v, err := it.ValueAndErr()
			if err != nil {
				return nil, fmt.Errorf("cannot read sketches %x: %w", kb, err)
			}
			err = forEachSketch(v, []byte(dim), func(comp, set []byte) error {
				value := string(comp[len(dim):])
				if (want != nil && !want[value]) || (match != nil && !match(value)) {
					return nil
				}
				full = append(append(full[:0], kb...), comp...)
				e, err := a.sketches.get(full, len(kb), set)
				if err != nil {
					return fmt.Errorf("cannot decode sketch %x: %w", full, err)
				}
				if mergeAll {
					value = ""
				}
				acc := out[value]
				if acc == nil {
					acc = new(visitorAcc)
					out[value] = acc
				}
				return acc.add(e)
			})
			if err != nil {
				return nil, err
			}
		}
	}
	return out, it.Error()
}
