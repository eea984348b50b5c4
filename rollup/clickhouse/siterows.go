package clickhouse

import (
	"encoding/binary"
	"fmt"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
)

// Site rows (DESIGN.md, "Site rows"): what each visit of a closed hour
// adds to any question, cut into terms keyed by (dimension, value, first
// hour f, last hour l). A question over the whole hours [A, B) counts a
// term when l >= A and f < B, and that sum is exactly what rowsBy counts
// over [A, B) for the same visits:
//
//   - a visit's session counters (visits, bounces, duration, ...) under
//     its value: f its start's hour, l its end's (it overlaps [A, B) when
//     end >= A and start < B);
//   - an event's pageviews, events and engaged ms, and its visit's id as
//     a visitor: f = l its hour;
//   - "a (visit, value) pair with such an event in range" (page and event
//     visits; engaged visits and scroll depth, whose depth is a maximum
//     over the range): a function F of the set of hours h_1 < ... < h_k
//     the pair has events in that [A, B) covers, which is always a run
//     h_I..h_J; F(I, J) is the sum of g(i, j) = F(i, j) - F(i+1, j) -
//     F(i, j-1) + F(i+1, j-1) over I <= i <= j <= J, and "i..j inside
//     [A, B)" is h_i >= A and h_j < B: term g(i, j) at f = h_j, l = h_i.
//     Engagement under a visit dimension counts only while the visit
//     overlaps the range (end >= A): l is capped at the end's hour.

// Counters of a site row, in site_rows' column order.
const (
	cVisits = iota
	cSessions
	cBounces
	cVisitPV
	cDuration
	cPageviews
	cEvents
	cEngagedMS
	cEngVisits
	cScroll
	cBots
	nCounters
)

// counterCols are site_rows' counter columns, in the order above.
const counterCols = "visits, sessions, bounces, visit_pv, duration_s, pageviews, events, engaged_ms, eng_visits, scroll_sum, bots"

// rowDims are the dimensions materialized: the whole site ("") and every
// native one.
var rowDims = append([]string{""}, query.SiteDimensions...)

// rowKey is a term's key; f and l are hours since the epoch.
type rowKey struct {
	dim, value string
	f, l       int64
}

// rowSum is a term's counters and, for f = l, the visitor ids.
type rowSum struct {
	c   [nCounters]int64
	ids map[uint64]struct{}
}

type unitRows map[rowKey]*rowSum

func (u unitRows) get(k rowKey) *rowSum {
	r := u[k]
	if r == nil {
		r = &rowSum{}
		u[k] = r
	}
	return r
}

func hourOf(ms int64) int64 { return floorDiv(ms, msPerHour) }

// pairKey is a (dimension, value) of one visit.
type pairKey struct{ dim, value string }

// hourMax is a pair's hour and the largest value it has in the hour.
type hourMax struct{ h, m int64 }

// addVisit adds visit vi, whose events are evIdx (in time order), to u.
func (d *siteData) addVisit(u unitRows, vi int32, evIdx []int32) {
	v := &d.visits[vi]
	sh, eh := hourOf(v.start), hourOf(v.end)
	vals := make([]string, len(rowDims))
	has := make([]bool, len(rowDims))
	for i, dim := range rowDims {
		if eventScoped(dim) {
			continue
		}
		vals[i], has[i] = d.visitValue(v, dim)
		if !has[i] {
			continue
		}
		r := u.get(rowKey{dim, vals[i], sh, eh})
		r.c[cVisits]++
		r.c[cSessions]++
		if v.bounced() {
			r.c[cBounces]++
		}
		r.c[cVisitPV] += int64(v.pv)
		r.c[cDuration] += v.end/1000 - v.start/1000
	}
	seen := make(map[pairKey][]int64)      // hours with an event of a page or event value
	engaged := make(map[pairKey][]hourMax) // hours with an engagement, deepest scroll
	for _, k := range evIdx {
		ev := &d.evs[k]
		h := hourOf(ev.Time)
		for i, dim := range rowDims {
			key, ok := vals[i], has[i]
			switch dim {
			case "page":
				key, ok = ev.Path, ev.Kind != ingest.KindCustom
			case "event":
				key, ok = ev.Name, ev.Kind == ingest.KindCustom
			}
			if !ok {
				continue
			}
			r := u.get(rowKey{dim, key, h, h})
			if r.ids == nil {
				r.ids = make(map[uint64]struct{})
			}
			r.ids[v.id] = struct{}{}
			switch ev.Kind {
			case ingest.KindPageview:
				r.c[cPageviews]++
				r.c[cEvents]++
			case ingest.KindCustom:
				r.c[cEvents]++
			case ingest.KindEngagement:
				r.c[cEngagedMS] += int64(ev.EngagedMS)
			}
			pk := pairKey{dim, key}
			if eventScoped(dim) {
				if hs := seen[pk]; len(hs) == 0 || hs[len(hs)-1] != h {
					seen[pk] = append(hs, h)
				}
			}
			if ev.Kind == ingest.KindEngagement {
				hs := engaged[pk]
				if len(hs) == 0 || hs[len(hs)-1].h != h {
					hs = append(hs, hourMax{h, 0})
				}
				hs[len(hs)-1].m = max(hs[len(hs)-1].m, int64(ev.ScrollDepth))
				engaged[pk] = hs
			}
		}
	}
	for pk, hs := range seen {
		ones := make([]hourMax, len(hs))
		for i, h := range hs {
			ones[i] = hourMax{h, 1}
		}
		mobius(ones, -1, func(f, l, g int64) { u.get(rowKey{pk.dim, pk.value, f, l}).c[cVisits] += g })
	}
	for pk, hs := range engaged {
		capL := int64(-1)
		if pk.dim != "page" {
			capL = eh
		}
		ones := make([]hourMax, len(hs))
		for i := range hs {
			ones[i] = hourMax{hs[i].h, 1}
		}
		mobius(ones, capL, func(f, l, g int64) { u.get(rowKey{pk.dim, pk.value, f, l}).c[cEngVisits] += g })
		mobius(hs, capL, func(f, l, g int64) { u.get(rowKey{pk.dim, pk.value, f, l}).c[cScroll] += g })
	}
}

// mobius emits the terms g(i, j) != 0 of F(i, j) = max(m_i..m_j) over the
// hours hs (ascending), at f = h_j and l = h_i (capped at capL when
// capL >= 0).
func mobius(hs []hourMax, capL int64, emit func(f, l, g int64)) {
	k := len(hs)
	prev := make([]int64, k+1) // F(i+1, j) at prev[j+1]; 0 for an empty run
	cur := make([]int64, k+1)
	for i := k - 1; i >= 0; i-- {
		clear(cur)
		for j := i; j < k; j++ {
			cur[j+1] = hs[j].m
			if j > i {
				cur[j+1] = max(cur[j], hs[j].m)
			}
			g := cur[j+1] - prev[j+1] - cur[j] + prev[j]
			if g != 0 {
				l := hs[i].h
				if capL >= 0 {
					l = min(l, capL)
				}
				emit(hs[j].h, l, g)
			}
		}
		prev, cur = cur, prev
	}
}

// appendTermHead appends the columns site_rows and site_days share, in
// their order, up to the counters: site, dim, value, the unit (or day)
// start, f, l, version and the counters.
func appendTermHead(b []byte, site, dim, value string, hour, f, l int64, version uint64, c *[nCounters]int64) []byte {
	b = appendString(b, site)
	b = appendString(b, dim)
	b = appendString(b, value)
	b = binary.LittleEndian.AppendUint32(b, uint32(hour*3600))
	b = binary.LittleEndian.AppendUint32(b, uint32(f))
	b = binary.LittleEndian.AppendUint32(b, uint32(l))
	b = binary.LittleEndian.AppendUint64(b, version)
	for _, n := range c {
		b = binary.LittleEndian.AppendUint64(b, uint64(n))
	}
	return b
}

// appendSiteRow appends one site_rows row in RowBinary (every column, in
// the table's order: migration 10's visitor_set last).
func appendSiteRow(b []byte, site string, unit int64, version uint64, k rowKey, r *rowSum) ([]byte, error) {
	b = appendTermHead(b, site, k.dim, k.value, unit, k.f, k.l, version, &r.c)
	// The id array stays empty since migration 10: the visitors go as a
	// visitor set (list or sketch, linkset.go) in visitor_set.
	b = binary.AppendUvarint(b, 0)
	var set []byte
	if len(r.ids) > 0 {
		ids := make([]uint64, 0, len(r.ids))
		for id := range r.ids {
			ids = append(ids, id)
		}
		var err error
		if set, err = linkSetOf(ids).appendTo(nil); err != nil {
			return nil, fmt.Errorf("cannot encode the visitors of a site row: %w", err)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(set)))
	return append(b, set...), nil
}
