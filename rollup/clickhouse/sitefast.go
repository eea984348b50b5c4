package clickhouse

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/waymark/waymark/rollup/query"
	"github.com/waymark/waymark/store"
)

// Site questions from site rows (siterows.go; DESIGN.md, "Site rows"):
// every metric of [lo, hi) is a sum over visits (visitors a union), so
// it is split by where a visit closed (the hour an event could last join
// it). Visits that closed in a clean unit before the horizon H come from
// the rows; visits closing at H or later from the raw events of H's day
// and the visits carried into that day (carried.go), so a visit going on
// across H is neither cut there nor read back to its start.

// sitePlan is a question's horizon and the clean units before it.
type sitePlan struct {
	h     int64  // ms: visits closing at or after it come from raw events
	low   int64  // the first unit (hour) read
	units string // SQL: a row of a clean unit before h, of its version
	// The open part is read from the midnight before h, day (an hour),
	// with the visits carried into it under seedVersion (0: none).
	day         int64
	seedVersion uint64
}

// plan finds the horizon of a question over [lo, hi) (whole hours): the
// first unit from a week before lo (as far back as a window reaches) that
// is not clean. Hours before the site's first marker have no events when
// that marker is clean (a late segment marks the hours it touches). nil:
// no row helps, ask the raw events.
func (b *Backend) plan(ctx context.Context, site string, lo, hi int64) (*sitePlan, error) {
	if b.cfg.NoRows {
		return nil, nil
	}
	low := hourOf(lo - 7*24*msPerHour - visitGapMS)
	// Every marker, not only those before hi: a visit overlapping the
	// range may close in any later unit.
	units, hours, err := b.c.siteUnits(ctx, site, max(hi, b.cfg.Now().UnixMilli()+msPerHour))
	if err != nil || len(hours) == 0 {
		return nil, err
	}
	h := low
	if first := hours[0]; h < first {
		if !units[first].clean {
			return nil, nil
		}
		h = first
	}
	// The version of each clean unit from start, by hour: a row counts
	// when its version is its unit's (rows of a run cut short, or of an
	// older run whose keys vanished, never do).
	start := h
	var vs strings.Builder
	end := hours[len(hours)-1]
	for ; h <= end; h++ {
		st, ok := units[h]
		if !ok || !st.clean {
			break
		}
		if vs.Len() > 0 {
			vs.WriteString(", ")
		}
		vs.WriteString(Uint(st.version))
	}
	if h*msPerHour <= lo || h == start {
		return nil, nil
	}
	day := floorDiv(h, 24) * 24
	var seedVersion uint64
	if st := units[day-1]; day > hours[0] {
		if !st.clean {
			return nil, nil // not reached: every unit from start to h is clean
		}
		seedVersion = st.version
	}
	return &sitePlan{h: h * msPerHour, low: low, day: day, seedVersion: seedVersion, units: fmt.Sprintf(
		"unit >= toDateTime(%d) AND unit < toDateTime(%d) AND version = arrayElement([%s], intDiv(toUInt32(unit) - %d, 3600) + 1)",
		start*3600, h*3600, vs.String(), start*3600)}, nil
}

// where selects the plan's rows of site under dim that count in [lo, hi).
func (p *sitePlan) where(site, dimCond string, lo, hi int64) string {
	return "site = " + String(site) + " AND " + dimCond +
		" AND f >= " + strconv.FormatInt(p.low, 10) + " AND f < " + strconv.FormatInt(hi/msPerHour, 10) +
		" AND l >= " + strconv.FormatInt(lo/msPerHour, 10) + " AND " + p.units
}

// hourBucketExpr is the bucket of an hour column among starts (ms): how
// many start at or before it (0: before the first).
func hourBucketExpr(col string, starts []int64) string {
	var sb strings.Builder
	sb.WriteString("arrayCount(s -> s <= " + col + ", [")
	for i, s := range starts {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(strconv.FormatInt(s/msPerHour, 10))
	}
	sb.WriteString("])")
	return sb.String()
}

// counterRow is one row of a counters answer.
type counterRow struct {
	dim, value string
	bf, bl     int64 // buckets of f and l (series)
	le         bool  // f <= l
	c          [nCounters]int64
	uniq       int64 // distinct visitors of its f = l rows
}

// siteUniq counts distinct visitors of site rows: exactly, as the raw
// path does (distinct visit ids), so site answers stay exact; its cost
// grows with the visits of the range (DESIGN.md, "Speed").
const siteUniq = "uniqExact"

// counters sums the plan's rows of site under the dimensions dims that
// count in [lo, hi), grouped by dimension and value and, with starts, by
// the buckets of f and l.
func (b *Backend) counters(ctx context.Context, p *sitePlan, site string, dims []string, lo, hi int64, starts []int64) ([]counterRow, error) {
	var dc []string
	for _, d := range dims {
		dc = append(dc, String(d))
	}
	sel, group := "dim, value", "dim, value"
	if starts != nil {
		sel += ", toUInt32(" + hourBucketExpr("f", starts) + ") AS bf, toUInt32(" + hourBucketExpr("l", starts) + ") AS bl, toUInt8(f <= l) AS le"
		group += ", bf, bl, le"
	} else {
		sel += ", toUInt32(0), toUInt32(0), toUInt8(1)"
	}
	for _, c := range strings.Split(counterCols, ", ") {
		sel += ", sum(" + c + ")"
	}
	sel += ", " + siteUniq + "Array(visitors)"
	body, err := b.c.QueryRowBinary(ctx, "SELECT "+sel+" FROM site_rows WHERE "+p.where(site, "dim IN ("+strings.Join(dc, ", ")+")", lo, hi)+" GROUP BY "+group)
	if err != nil {
		return nil, fmt.Errorf("cannot read the site rows of %q: %w", site, err)
	}
	var out []counterRow
	rd := rbReader{b: body}
	for len(rd.b) > 0 && rd.err == nil {
		var r counterRow
		r.dim, r.value = rd.str(), rd.str()
		r.bf, r.bl = int64(rd.u32()), int64(rd.u32())
		r.le = rd.u8() == 1
		for i := range r.c {
			r.c[i] = int64(rd.u64())
		}
		r.uniq = int64(rd.u64())
		out = append(out, r)
	}
	if rd.err != nil {
		return nil, fmt.Errorf("cannot read the site rows of %q: %w", site, rd.err)
	}
	return out, nil
}

// visitorCounts counts distinct visitors per group: the ids of the plan's
// rows of site under dim with an event in [lo, hi) (f = l), grouped by
// the SQL expression group (a String), only of values (all when nil),
// with the open part's ids of each group added.
func (b *Backend) visitorCounts(ctx context.Context, p *sitePlan, site, dim string, lo, hi int64, group string, values []string, open map[string]map[uint64]struct{}) (map[string]int64, error) {
	nOpen := 0
	for _, ids := range open {
		nOpen += len(ids)
	}
	if values != nil && len(values) == 0 && nOpen == 0 {
		return map[string]int64{}, nil
	}
	var sb strings.Builder
	sb.WriteString("SELECT g, " + siteUniq + "(id) FROM (SELECT " + group + " AS g, arrayJoin(visitors) AS id FROM site_rows WHERE " +
		p.where(site, "dim = "+String(dim), lo, hi) + " AND f = l")
	if values != nil {
		sb.WriteString(" AND value IN (")
		if len(values) == 0 {
			sb.WriteString("''")
		}
		for i, v := range values {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(String(v))
		}
		sb.WriteString(")")
		if len(values) == 0 {
			sb.WriteString(" AND 0")
		}
	}
	if nOpen > 0 {
		sb.WriteString(" UNION ALL SELECT tupleElement(t, 1) AS g, tupleElement(t, 2) AS id FROM (SELECT arrayJoin([")
		first := true
		for g, ids := range open {
			for id := range ids {
				if !first {
					sb.WriteString(", ")
				}
				first = false
				sb.WriteString("(" + String(g) + ", toUInt64(" + Uint(id) + "))")
			}
		}
		sb.WriteString("]) AS t)")
	}
	sb.WriteString(") GROUP BY g")
	body, err := b.c.QueryRowBinary(ctx, sb.String())
	if err != nil {
		return nil, fmt.Errorf("cannot count the visitors of site %q: %w", site, err)
	}
	out := make(map[string]int64)
	rd := rbReader{b: body}
	for len(rd.b) > 0 && rd.err == nil {
		g := rd.str()
		out[g] = int64(rd.u64())
	}
	if rd.err != nil {
		return nil, fmt.Errorf("cannot count the visitors of site %q: %w", site, rd.err)
	}
	return out, nil
}

// fastBuckets answers a site's metrics for each bucket [starts[i],
// starts[i+1]) (the last ending at end) of the visits matching dim's
// filter, and the bot events of each, from site rows and the open part.
func (b *Backend) fastBuckets(ctx context.Context, p *sitePlan, site string, starts []int64, end int64, dim string, match func(string) bool) ([]*row, []int64, error) {
	n := len(starts)
	lo := starts[0]
	rows := make([]*row, n)
	for i := range rows {
		rows[i] = newRow()
	}
	bots := make([]int64, n)
	dims := []string{""}
	if dim != "" {
		dims = append(dims, dim)
	}
	cr, err := b.counters(ctx, p, site, dims, lo, end, starts)
	if err != nil {
		return nil, nil, err
	}
	matched := map[string]bool{}
	for i := range cr {
		r := &cr[i]
		if r.dim == "" && r.le && r.bf == r.bl && r.bf >= 1 && r.bf <= int64(n) {
			bots[r.bf-1] += r.c[cBots]
		}
		if r.dim != dim || match != nil && !match(r.value) {
			continue
		}
		matched[r.value] = true
		if !r.le {
			if r.bf == r.bl && r.bf >= 1 && r.bf <= int64(n) {
				rows[r.bf-1].addCounters(&r.c)
			}
			continue
		}
		for k := max(r.bf, 1); k <= min(r.bl, int64(n)); k++ {
			rows[k-1].addCounters(&r.c)
		}
	}
	open := map[string]map[uint64]struct{}{}
	if p.h < end {
		d, err := b.openPart(ctx, p, site, end, dimCols[dim])
		if err != nil {
			return nil, nil, err
		}
		for i := range starts {
			hi := end
			if i+1 < n {
				hi = starts[i+1]
			}
			o := d.filteredFrom(starts[i], hi, dim, match, p.h)
			o.uniq = nil
			rows[i].add(o)
			if len(o.visitors) > 0 {
				open[strconv.Itoa(i+1)] = o.visitors
			}
		}
		ob, err := b.botEvents(ctx, site, starts, end, p.h)
		if err != nil {
			return nil, nil, err
		}
		for i := range bots {
			bots[i] += ob[i]
		}
	}
	values := make([]string, 0, len(matched))
	for v := range matched {
		values = append(values, v)
	}
	slices.Sort(values)
	if len(values) <= 1 && len(open) == 0 {
		// One value and nothing open: a bucket's visitors are its group
		// of f = l rows (the other groups hold no ids).
		for i := range rows {
			var u int64
			rows[i].uniq = &u
		}
		for i := range cr {
			r := &cr[i]
			if r.dim == dim && matched[r.value] && r.le && r.bf == r.bl && r.bf >= 1 && r.bf <= int64(n) {
				*rows[r.bf-1].uniq += r.uniq
			}
		}
		return rows, bots, nil
	}
	vc, err := b.visitorCounts(ctx, p, site, dim, lo, end, "toString("+hourBucketExpr("f", starts)+")", values, open)
	if err != nil {
		return nil, nil, err
	}
	for i := range rows {
		u := vc[strconv.Itoa(i+1)]
		rows[i].uniq = &u
	}
	return rows, bots, nil
}

// fastBreakdown is rowsBy over [lo, hi) by dim from site rows and the
// open part, visitors counted per value.
func (b *Backend) fastBreakdown(ctx context.Context, p *sitePlan, site string, lo, hi int64, dim string) (map[string]*row, error) {
	rows, _, err := b.fastBreakdownOpen(ctx, p, site, lo, hi, dim)
	return rows, err
}

// fastBreakdownOpen is fastBreakdown, and the open part's visitor ids of
// each value.
func (b *Backend) fastBreakdownOpen(ctx context.Context, p *sitePlan, site string, lo, hi int64, dim string) (map[string]*row, map[string]map[uint64]struct{}, error) {
	cr, err := b.counters(ctx, p, site, []string{dim}, lo, hi, nil)
	if err != nil {
		return nil, nil, err
	}
	out := make(map[string]*row, len(cr))
	get := func(v string) *row {
		r := out[v]
		if r == nil {
			r = newRow()
			out[v] = r
		}
		return r
	}
	uniq := make(map[string]int64, len(cr))
	for i := range cr {
		get(cr[i].value).addCounters(&cr[i].c)
		uniq[cr[i].value] = cr[i].uniq
	}
	open := map[string]map[uint64]struct{}{}
	if p.h < hi {
		d, err := b.openPart(ctx, p, site, hi, dimCols[dim])
		if err != nil {
			return nil, nil, err
		}
		for v, o := range d.rowsFrom(lo, hi, dim, p.h) {
			get(v).add(o)
			if len(o.visitors) > 0 {
				open[v] = o.visitors
			}
		}
	}
	if len(open) > 0 {
		// The values with open visitors: theirs and the rows' ids as one
		// set.
		values := make([]string, 0, len(open))
		for v := range open {
			values = append(values, v)
		}
		slices.Sort(values)
		vc, err := b.visitorCounts(ctx, p, site, dim, lo, hi, "value", values, open)
		if err != nil {
			return nil, nil, err
		}
		for _, v := range values {
			uniq[v] = vc[v]
		}
	}
	for v, r := range out {
		u := uniq[v]
		r.uniq = &u
	}
	return out, open, nil
}

// fastGoals is SiteGoalStats' counting from site rows: the site's
// visitors, and each goal's events and converted visitors (a page goal's
// as one set over the pages it matches).
func (b *Backend) fastGoals(ctx context.Context, p *sitePlan, site string, lo, hi int64, goals []store.Goal) (uint64, []query.GoalStat, error) {
	tot, _, err := b.fastBuckets(ctx, p, site, []int64{lo}, hi, "", nil)
	if err != nil {
		return 0, nil, err
	}
	total := tot[0].visitorCount()
	pages, pagesOpen, err := b.fastBreakdownOpen(ctx, p, site, lo, hi, "page")
	if err != nil {
		return 0, nil, err
	}
	names, err := b.fastBreakdown(ctx, p, site, lo, hi, "event")
	if err != nil {
		return 0, nil, err
	}
	out := make([]query.GoalStat, 0, len(goals))
	for i := range goals {
		g := &goals[i]
		st := query.GoalStat{ID: g.ID, DisplayName: g.DisplayName, GoalType: g.Type()}
		var converted int64
		if g.IsPage() {
			path := g.PagePath
			st.PagePath = &path
			m := g.Matcher()
			var values []string
			open := map[string]map[uint64]struct{}{"g": {}}
			for v, x := range pages {
				if x.pageviews > 0 && m.MatchPage(v) {
					st.Events += x.pageviews
					values = append(values, v)
					for id := range pagesOpen[v] {
						open["g"][id] = struct{}{}
					}
				}
			}
			slices.Sort(values)
			if len(values) > 0 {
				vc, err := b.visitorCounts(ctx, p, site, "page", lo, hi, "'g'", values, open)
				if err != nil {
					return 0, nil, err
				}
				converted = vc["g"]
			}
		} else {
			name := g.EventName
			st.EventName = &name
			if x := names[name]; x != nil {
				st.Events = x.events
				converted = int64(x.visitorCount())
			}
		}
		st.Visitors = min(uint64(converted), total)
		out = append(out, st)
	}
	return total, out, nil
}

// noFloor is botEvents' floor for every event.
const noFloor = math.MinInt64

// openPart reads the events a plan's open part over [.., hi) needs: from
// the midnight before its horizon, after the visits carried into it,
// widened forward while a visit may go on.
func (b *Backend) openPart(ctx context.Context, p *sitePlan, site string, hi int64, cols colSet) (*siteData, error) {
	seed, err := b.c.loadCarried(ctx, site, p.day, p.seedVersion)
	if err != nil {
		return nil, err
	}
	from := p.day * msPerHour
	return b.window(ctx, site, seed, from, max(hi, from)+msPerHour, from, hi, from, cols)
}
