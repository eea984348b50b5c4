package rollup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/cockroachdb/pebble/v2"

	"github.com/waymark/waymark/ingest"
)

// maxRawScan bounds the raw events a query answered from raw events may
// read (counted from the day records of the days it scans).
const maxRawScan = 5_000_000

// needsRaw reports whether a site query must be answered from the raw
// events: its filters are all valid but name more than one dimension, or
// a breakdown (dimension, "" for none) is filtered on another dimension.
// Rows are kept per dimension, not per combination.
func needsRaw(dimension string, filters []DimFilter) bool {
	if len(filters) == 0 {
		return false
	}
	dims := make(map[string]bool)
	for _, f := range filters {
		if _, ok := siteDims[f.Dimension]; !ok || (f.Op != "is" && f.Op != "is_not" && f.Op != "contains") {
			return false // filterOn reports it
		}
		dims[f.Dimension] = true
	}
	return len(dims) > 1 || (dimension != "" && !dims[dimension])
}

// rawKey is one cell of a raw answer: a bucket and a breakdown value.
type rawKey struct {
	b     int
	value string
}

// rawAnswer holds counters and exact visitor sets per cell, in the same
// fields the rollups keep, so metricsOf turns them into metrics.
type rawAnswer struct {
	rows     map[rawKey]*counters
	visitors map[rawKey]map[uint64]struct{}
}

func (r *rawAnswer) add(k rawKey, field int, n int64) {
	c := r.rows[k]
	if c == nil {
		c = new(counters)
		r.rows[k] = c
	}
	c[field] += n
}

func (r *rawAnswer) visitor(k rawKey, h uint64) {
	s := r.visitors[k]
	if s == nil {
		s = make(map[uint64]struct{})
		r.visitors[k] = s
	}
	s[h] = struct{}{}
	if r.rows[k] == nil {
		r.rows[k] = new(counters)
	}
}

// rawEvent is what a raw query keeps of an event while its visit is open.
type rawEvent struct {
	t          int64
	kind       ingest.Kind
	path, name string
	hash       uint64
	engagedMS  int64
	scroll     int64
}

type openVisit struct {
	r      run
	events []rawEvent
}

// rawQuery answers site queries exactly from the raw events. Events are
// grouped into visits as the rollups do (30-minute gap, first event's
// attributes, midnight hash links); visit-scoped filters test the visit,
// event-scoped ones (page, event) the events, and a visit counts when it
// started in range and holds a matching pageview or custom event.
type rawQuery struct {
	filters  []DimFilter
	bdim     byte // breakdown dimension; dimTotal for none
	starts   []int64
	lo, hi   int64 // the range, at whole UTC hours as the rollups read it
	eventDim bool  // an event-scoped filter or breakdown: pageviews are events
	out      rawAnswer
}

func (q *rawQuery) bucket(t int64) (int, bool) {
	if t < q.lo || t >= q.hi {
		return 0, false
	}
	i := sort.Search(len(q.starts), func(i int) bool { return q.starts[i] > t }) - 1
	return max(i, 0), true
}

func visitValue(r *run, dim byte) string {
	switch dim {
	case dimEntryPage:
		return r.entry
	case dimExitPage:
		return r.exit
	}
	vals, _ := r.visitDims()
	for i, d := range visitDimIDs {
		if d == dim {
			return vals[i]
		}
	}
	return ""
}

func eventValue(e *rawEvent, dim byte) (string, bool) {
	switch dim {
	case dimPage:
		return e.path, e.kind == ingest.KindPageview || e.kind == ingest.KindEngagement
	case dimEventName:
		return e.name, e.kind == ingest.KindCustom
	}
	return "", false
}

func (q *rawQuery) close(v *openVisit) {
	r := &v.r
	for i := range q.filters {
		f := &q.filters[i]
		if d := siteDims[f.Dimension]; !eventScoped(d) && !f.match(visitValue(r, d)) {
			return
		}
	}
	matched := make(map[string]bool) // breakdown values of matching pageviews and custom events
	for i := range v.events {
		e := &v.events[i]
		ok := true
		for j := range q.filters {
			f := &q.filters[j]
			d := siteDims[f.Dimension]
			if !eventScoped(d) {
				continue
			}
			val, has := eventValue(e, d)
			if !has && d == dimEventName {
				val, has = e.name, true // event:name "pageview" matches pageviews
			}
			ok = ok && has && f.match(val)
		}
		if !ok {
			continue
		}
		value := ""
		switch {
		case q.bdim == dimTotal:
		case eventScoped(q.bdim):
			val, has := eventValue(e, q.bdim)
			if !has {
				continue
			}
			value = val
		default:
			value = visitValue(r, q.bdim)
		}
		if e.kind == ingest.KindPageview || e.kind == ingest.KindCustom {
			matched[value] = true
		}
		b, in := q.bucket(e.t)
		if !in {
			continue
		}
		k := rawKey{b, value}
		switch e.kind {
		case ingest.KindPageview:
			q.out.add(k, fCount, 1)
			q.out.visitor(k, e.hash)
		case ingest.KindCustom:
			q.out.add(k, fEvents, 1)
			q.out.visitor(k, e.hash)
		case ingest.KindEngagement:
			q.out.add(k, fEngagedMS, e.engagedMS)
			q.out.add(k, fEngVisits, 1)
			q.out.add(k, fScrollSum, e.scroll)
		}
	}
	b, in := q.bucket(r.start)
	if !r.counted() || !in {
		return
	}
	if (q.bdim == dimEntryPage || q.bdim == dimExitPage) && r.pageviews == 0 {
		return
	}
	bounce := int64(0)
	if r.pageviews == 1 {
		bounce = 1
	}
	for value := range matched {
		k := rawKey{b, value}
		q.out.add(k, fVisits, 1)
		q.out.add(k, fBounces, bounce)
		q.out.add(k, fVisitPV, int64(r.pageviews))
		q.out.add(k, fDurationMS, r.end-r.start)
	}
}

// rawSite scans the raw events of site from the UTC day before buckets
// start to the day after they end (so visits crossing the edges come out
// whole, as Rebuild does) and answers per bucket and breakdown value.
func (a *Aggregator) rawSite(site string, buckets []Range, bdim byte, filters []DimFilter) (*rawQuery, error) {
	q := &rawQuery{filters: filters, bdim: bdim, eventDim: eventScoped(bdim) && bdim != dimTotal,
		out: rawAnswer{rows: make(map[rawKey]*counters), visitors: make(map[rawKey]map[uint64]struct{})}}
	for _, f := range filters {
		if d := siteDims[f.Dimension]; eventScoped(d) {
			q.eventDim = true
		}
	}
	for i, b := range buckets {
		h0, h1 := b.hours()
		if i == 0 {
			q.lo = int64(h0) * msPerHour
		}
		q.hi = int64(h1) * msPerHour
		q.starts = append(q.starts, int64(h0)*msPerHour)
	}
	if q.hi <= q.lo {
		return q, nil
	}
	d0, d1 := dayOf(q.lo), dayOf(q.hi-1)+1
	if d0 > 0 {
		d0--
	}
	if err := a.checkRawScan(d0, d1); err != nil {
		return nil, err
	}

	open := make(map[uint64]*openVisit)
	alias := make(map[uint64]uint64) // next day's hash -> the visitor it continues
	canon := func(h uint64) uint64 {
		if c, ok := alias[h]; ok {
			return c
		}
		return h
	}
	err := scanEvents(a.db, d0, d1+1, func(ev *ingest.Event) bool {
		if ev.SiteID != site || ev.Kind == ingest.KindClick {
			return true
		}
		if ev.Bot() {
			if b, in := q.bucket(ev.Time); in && bdim == dimTotal {
				q.out.add(rawKey{b, ""}, fBots, 1)
			}
			return true
		}
		if p := ev.PrevVisitorHash; p != 0 && p != ev.VisitorHash {
			if _, ok := alias[ev.VisitorHash]; !ok && open[ev.VisitorHash] == nil {
				alias[ev.VisitorHash] = canon(p)
			}
		}
		who := canon(ev.VisitorHash)
		v := open[who]
		if v != nil && ev.Time-v.r.end > visitGapMS {
			q.close(v)
			v = nil
		}
		r := runOf(ev, ev.VisitorHash)
		if v == nil {
			v = &openVisit{r: r}
			open[who] = v
		} else {
			v.r = merge(v.r, r)
		}
		v.events = append(v.events, rawEvent{t: ev.Time, kind: ev.Kind, path: ev.Path, name: ev.Name,
			hash: ev.VisitorHash, engagedMS: int64(ev.EngagedMS), scroll: int64(ev.ScrollDepth)})
		return true
	})
	if err != nil {
		return nil, err
	}
	for _, v := range open {
		q.close(v)
	}
	return q, nil
}

// metrics returns the metrics of one cell, visitors exact.
func (q *rawQuery) metrics(k rawKey) SiteMetrics {
	dim := byte(dimCountry) // visit-scoped: pageviews of the visits
	if q.eventDim {
		dim = dimPage
	}
	c := q.out.rows[k]
	if c == nil {
		c = new(counters)
	}
	m := metricsOf(dim, c, c, uint64(len(q.out.visitors[k])))
	m.BotEvents = c[fBots]
	return m
}

// checkRawScan refuses a scan of days [d0, d1] holding more than
// maxRawScan events (of every site: the day records count them all).
func (a *Aggregator) checkRawScan(d0, d1 day) error {
	var n uint64
	for d := d0; d <= d1; d++ {
		v, closer, err := a.db.Get(dayKey(d))
		if errors.Is(err, pebble.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("cannot read day record: %w", err)
		}
		if len(v) >= 8 {
			n += binary.BigEndian.Uint64(v)
		}
		closer.Close()
	}
	return rawScanBound(n)
}

func rawScanBound(n uint64) error {
	if n > maxRawScan {
		return fmt.Errorf("%w: filters on several dimensions are answered from raw events, and the range holds %d of them (at most %d); narrow the date range",
			ErrUnsupportedQuery, n, maxRawScan)
	}
	return nil
}
