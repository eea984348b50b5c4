package clickhouse

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Site rows read into Go (DESIGN.md, "Visitor sets and the row cache"):
// since migration 10 a row's visitors are a visitor set, which ClickHouse
// cannot merge, so a question reads the rows of its clean units (the
// cache first: sitecache.go, else one SELECT for the units it lacks),
// and sums counters and merges sets here. A whole clean day whose hours
// no cut of the question falls inside is read as its day rows: the
// day's units' rows merged once, with the hours of the day collapsed to
// its first (below), cached under the 24 versions.

// unitsFrom is the first unit a question over [lo, ..) reads: a unit
// holds the visits that closed in it, and every term of such a visit has
// l at or before it, so a unit before lo's hour never counts (l >= lo).
func (p *sitePlan) unitsFrom(lo int64) int64 { return max(p.start, floorDiv(lo, msPerHour)) }

// cuts are the hours a question's answer changes at: a row counts when
// p.low <= f < hi and l >= lo, and the buckets start at starts. A day
// none of them falls strictly inside can be read as its day rows.
type cuts []int64

func questionCuts(p *sitePlan, lo, hi int64, starts []int64) cuts {
	c := cuts{p.low, floorDiv(lo, msPerHour), floorDiv(hi, msPerHour)}
	for _, s := range starts {
		c = append(c, floorDiv(s, msPerHour))
	}
	return c
}

// wholeDay reports whether no cut falls inside the day from hour d0.
func (c cuts) wholeDay(d0 int64) bool {
	for _, h := range c {
		if h > d0 && h < d0+24 {
			return false
		}
	}
	return true
}

// unitRowSets are the rows a question reads, unit by unit or day by day.
type unitRowSets [][]siteRow

// planRows is the rows of site under dim of the plan's clean units from
// unitsFrom(lo) to its horizon: a whole day inside them that no cut falls
// inside as its day rows (cached, else merged from its units' rows), the
// other units as they are (cached, else read in one statement).
//
// With stored non-nil, the days not cached whose day rows are in
// site_days are not read but listed there (their first hours), for the
// caller to sum in ClickHouse (storedSums).
func (b *Backend) planRows(ctx context.Context, p *sitePlan, site, dim string, lo int64, c cuts, stored *[]int64) (unitRowSets, error) {
	from, to := p.unitsFrom(lo), p.h/msPerHour
	var out unitRowSets
	type dayAt struct {
		d0  int64
		key siteRowKey
	}
	var days []dayAt
	var miss []int64
	for u := from; u < to; {
		if u%24 == 0 && u+24 <= to && c.wholeDay(u) {
			k := siteRowKey{site: site, dim: dim, unit: u, version: p.dayVersion(u), day: true}
			if rows, ok := b.sites.get(k); ok {
				out = append(out, rows)
			} else {
				days = append(days, dayAt{u, k})
			}
			u += 24
			continue
		}
		if rows, ok := b.sites.get(p.unitKey(site, dim, u)); ok {
			out = append(out, rows)
		} else {
			miss = append(miss, u)
		}
		u++
	}
	if len(days) > 0 {
		// The day rows the materializer wrote (sitedays.go); a day without
		// them is merged here from its units' rows.
		d0s, vs := make([]int64, len(days)), make([]uint64, len(days))
		for i, d := range days {
			d0s[i], vs[i] = d.d0, d.key.version
		}
		var have map[int64][]siteRow
		var err error
		if stored != nil {
			have, err = b.siteDayMarks(ctx, site, d0s, vs)
		} else {
			have, err = b.readSiteDays(ctx, site, dim, d0s, vs)
		}
		if err != nil {
			return nil, err
		}
		left := days[:0]
		for _, d := range days {
			if rows, ok := have[d.d0]; ok {
				if stored != nil {
					*stored = append(*stored, d.d0)
					continue
				}
				b.sites.put(d.key, rows)
				out = append(out, rows)
				continue
			}
			left = append(left, d)
			for h := d.d0; h < d.d0+24; h++ {
				if _, ok := b.sites.get(p.unitKey(site, dim, h)); !ok {
					miss = append(miss, h)
				}
			}
		}
		days = left
		slices.Sort(miss)
	}
	got := map[int64][]siteRow{}
	if len(miss) > 0 {
		var err error
		if got, err = b.readSiteRows(ctx, p, site, dim, miss); err != nil {
			return nil, err
		}
		for _, u := range miss {
			b.sites.put(p.unitKey(site, dim, u), got[u])
		}
	}
	inDay := map[int64]bool{}
	for _, d := range days {
		for h := d.d0; h < d.d0+24; h++ {
			inDay[h] = true
		}
	}
	for _, u := range miss {
		if !inDay[u] {
			out = append(out, got[u])
		}
	}
	for _, d := range days {
		units := make([][]siteRow, 0, 24)
		for h := d.d0; h < d.d0+24; h++ {
			rows, ok := got[h]
			if !ok {
				rows, _ = b.sites.get(p.unitKey(site, dim, h))
			}
			units = append(units, rows)
		}
		rows, err := mergeDay(d.d0, units)
		if err != nil {
			return nil, err
		}
		b.sites.put(d.key, rows)
		out = append(out, rows)
	}
	return out, nil
}

func (p *sitePlan) unitKey(site, dim string, u int64) siteRowKey {
	return siteRowKey{site: site, dim: dim, unit: u, version: p.versions[u-p.start]}
}

// dayVersion is the version of the day from hour d0: a hash of its 24
// units' versions, so its rows count only under the versions they were
// merged from.
func (p *sitePlan) dayVersion(d0 int64) uint64 {
	return hashVersions(p.versions[d0-p.start : d0-p.start+24])
}

// mergeDay merges the rows of a day's 24 units (from hour d0) by value
// and term hours, an hour inside the day replaced by d0: a question with
// no cut inside the day (cuts.wholeDay) counts a term the same at any
// hour of it. Hours outside the day (a visit begun before it) are kept.
// Visitors are merged for rows that are f = l before and after.
func mergeDay(d0 int64, units [][]siteRow) ([]siteRow, error) {
	type key struct {
		value string
		f, l  int64
	}
	in := func(h int64) int64 {
		if h >= d0 && h < d0+24 {
			return d0
		}
		return h
	}
	idx := map[key]int{}
	var out []siteRow
	for _, rows := range units {
		for i := range rows {
			r := &rows[i]
			k := key{r.value, in(r.f), in(r.l)}
			j, ok := idx[k]
			if !ok {
				j = len(out)
				idx[k] = j
				out = append(out, siteRow{value: r.value, f: k.f, l: k.l})
			}
			o := &out[j]
			for c := range o.c {
				o.c[c] += r.c[c]
			}
			if r.set != nil && r.f == r.l {
				if o.set == nil {
					o.set = &linkSet{}
				}
				if err := unionInto(o.set, r.set); err != nil {
					return nil, err
				}
			}
		}
	}
	for i := range out {
		if out[i].set != nil {
			out[i].set.compact()
		}
	}
	return out, nil
}

// unionInto adds o to s, folding s's list into its sketch as it grows so
// a union of many lists stays bounded.
func unionInto(s, o *linkSet) error {
	if err := s.add(o); err != nil {
		return err
	}
	if len(s.hashes) > 8*linkListMax {
		s.compact()
	}
	return nil
}

// readSiteRows reads the rows of site under dim of the plan's units miss
// (ascending), of their versions only, by unit.
func (b *Backend) readSiteRows(ctx context.Context, p *sitePlan, site, dim string, miss []int64) (map[int64][]siteRow, error) {
	var vs strings.Builder
	first, last := miss[0], miss[len(miss)-1]
	for u := first; u <= last; u++ {
		if vs.Len() > 0 {
			vs.WriteString(", ")
		}
		vs.WriteString(Uint(p.versions[u-p.start]))
	}
	body, err := b.c.QueryRowBinary(ctx, fmt.Sprintf("SELECT toUInt32(unit), value, f, l, %s, visitor_set FROM site_rows WHERE site = %s AND dim = %s"+
		" AND unit >= toDateTime(%d) AND unit < toDateTime(%d) AND version = arrayElement([%s], intDiv(toUInt32(unit) - %d, 3600) + 1)",
		counterCols, String(site), String(dim), first*3600, (last+1)*3600, vs.String(), first*3600))
	if err != nil {
		return nil, fmt.Errorf("cannot read the site rows of %q: %w", site, err)
	}
	got := map[int64][]siteRow{}
	rd := &rbReader{b: body}
	for len(rd.b) > 0 && rd.err == nil {
		u := int64(rd.u32()) / 3600
		r, err := readSiteRow(rd)
		if err != nil {
			return nil, fmt.Errorf("cannot read the site rows of %q: %w", site, err)
		}
		got[u] = append(got[u], r)
	}
	if rd.err != nil {
		return nil, fmt.Errorf("cannot read the site rows of %q: %w", site, rd.err)
	}
	return got, nil
}

// bucketOf is how many of the hours starts (ascending) are at or before
// h (0: before the first).
func bucketOf(h int64, starts []int64) int64 {
	n := int64(0)
	for _, s := range starts {
		if s <= h {
			n++
		}
	}
	return n
}

// counts reports whether a row counts in [lo, hi) (hours) of plan p.
func (p *sitePlan) counts(r *siteRow, loH, hiH int64) bool {
	return r.f >= p.low && r.f < hiH && r.l >= loH
}

// groupSets merges the visitors of the f = l rows of sets that count in
// [lo, hi) and pass keep, by group.
func (p *sitePlan) groupSets(sets unitRowSets, lo, hi int64, keep func(*siteRow) bool, group func(*siteRow) string) (map[string]*linkSet, error) {
	loH, hiH := floorDiv(lo, msPerHour), floorDiv(hi, msPerHour)
	out := map[string]*linkSet{}
	for _, rows := range sets {
		for i := range rows {
			r := &rows[i]
			if r.set == nil || r.f != r.l || !p.counts(r, loH, hiH) || keep != nil && !keep(r) {
				continue
			}
			g := group(r)
			s := out[g]
			if s == nil {
				s = &linkSet{}
				out[g] = s
			}
			if err := unionInto(s, r.set); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// bucketGroup groups rows by the bucket of f, as a string.
func bucketGroup(starts []int64) func(*siteRow) string {
	hs := make([]int64, len(starts))
	for i, s := range starts {
		hs[i] = floorDiv(s, msPerHour)
	}
	return func(r *siteRow) string { return strconv.FormatInt(bucketOf(r.f, hs), 10) }
}
