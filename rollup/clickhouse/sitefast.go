package clickhouse

import (
	"cmp"
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

// siteEstimated and siteGoalsEstimated are the Estimated lists of
// answers from site rows: their visitors are visitor sets merged
// (exact up to 128 a set, within 2.43 % past it: DESIGN.md, "Visitor
// sets and the row cache"), as the embedded store's are.
var (
	siteEstimated      = []string{"visitors"}
	siteGoalsEstimated = []string{"total_visitors", "visitors", "conversion_rate"}
)

// sitePlan is a question's horizon and the clean units before it.
type sitePlan struct {
	h   int64 // ms: visits closing at or after it come from raw events
	low int64 // hours: a term counts only from here (a raw window's reach back)
	// The clean units [start, h) and their versions: a row counts only
	// under its unit's version (rows of a run cut short, or of an older
	// run whose keys vanished, never do).
	start    int64
	versions []uint64
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
	var versions []uint64
	end := hours[len(hours)-1]
	for ; h <= end; h++ {
		st, ok := units[h]
		if !ok || !st.clean {
			break
		}
		versions = append(versions, st.version)
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
	return &sitePlan{h: h * msPerHour, low: low, day: day, seedVersion: seedVersion, start: start, versions: versions}, nil
}

// counterRow is one group of a counters answer.
type counterRow struct {
	dim, value string
	bf, bl     int64 // buckets of f and l (series)
	le         bool  // f <= l
	c          [nCounters]int64
	sets       []*linkSet // visitors of its f = l rows (cached: read only)
}

// visitors is the group's distinct visitors: its sets merged (exact up to
// linkListMax, an estimate within the sets' bound past it).
func (r *counterRow) visitors() (int64, error) {
	var u linkSet
	for _, s := range r.sets {
		if err := unionInto(&u, s); err != nil {
			return 0, err
		}
	}
	return int64(u.estimate()), nil
}

// counters sums the plan's rows of site under the dimensions dims that
// count in [lo, hi), grouped by dimension and value and, with starts, by
// the buckets of f and l (else 0, 0 and le).
func (b *Backend) counters(ctx context.Context, p *sitePlan, site string, dims []string, lo, hi int64, starts []int64) ([]counterRow, error) {
	c := questionCuts(p, lo, hi, starts)
	acc := newCounterAcc(p, lo, hi, starts)
	for _, dim := range dims {
		sets, err := b.planRows(ctx, p, site, dim, lo, c, nil)
		if err != nil {
			return nil, err
		}
		acc.add(dim, sets)
	}
	return acc.out, nil
}

// counterAcc groups rows into counterRows.
type counterAcc struct {
	p          *sitePlan
	loH, hiH   int64
	hs         []int64 // bucket starts (hours); nil: no buckets
	idx        map[counterKey]int
	out        []counterRow
	withStarts bool
}

type counterKey struct {
	dim, value string
	bf, bl     int64
	le         bool
}

func newCounterAcc(p *sitePlan, lo, hi int64, starts []int64) *counterAcc {
	a := &counterAcc{p: p, loH: floorDiv(lo, msPerHour), hiH: floorDiv(hi, msPerHour), idx: map[counterKey]int{}, withStarts: starts != nil}
	for _, s := range starts {
		a.hs = append(a.hs, floorDiv(s, msPerHour))
	}
	return a
}

// add sums the rows of dim that count.
func (a *counterAcc) add(dim string, sets unitRowSets) {
	for _, rows := range sets {
		for i := range rows {
			r := &rows[i]
			if !a.p.counts(r, a.loH, a.hiH) {
				continue
			}
			k := counterKey{dim: dim, value: r.value, le: true}
			if a.withStarts {
				k.bf, k.bl, k.le = bucketOf(r.f, a.hs), bucketOf(r.l, a.hs), r.f <= r.l
			}
			o := a.row(k)
			for n := range o.c {
				o.c[n] += r.c[n]
			}
			if r.set != nil && r.f == r.l {
				o.sets = append(o.sets, r.set)
			}
		}
	}
}

func (a *counterAcc) row(k counterKey) *counterRow {
	j, ok := a.idx[k]
	if !ok {
		j = len(a.out)
		a.idx[k] = j
		a.out = append(a.out, counterRow{dim: k.dim, value: k.value, bf: k.bf, bl: k.bl, le: k.le})
	}
	return &a.out[j]
}

// visitorCounts counts distinct visitors per group: the visitors of the
// plan's rows of site under dim with an event in [lo, hi) (f = l),
// grouped by group, only of values (all when nil), with the open part's
// ids of each group added.
func (b *Backend) visitorCounts(ctx context.Context, p *sitePlan, site, dim string, lo, hi int64, starts []int64, group func(*siteRow) string, values []string, open map[string]map[uint64]struct{}) (map[string]int64, error) {
	sets, err := b.planRows(ctx, p, site, dim, lo, questionCuts(p, lo, hi, starts), nil)
	if err != nil {
		return nil, err
	}
	var keep func(*siteRow) bool
	if values != nil {
		in := make(map[string]bool, len(values))
		for _, v := range values {
			in[v] = true
		}
		keep = func(r *siteRow) bool { return in[r.value] }
	}
	by, err := p.groupSets(sets, lo, hi, keep, group)
	if err != nil {
		return nil, err
	}
	for g, ids := range open {
		s := by[g]
		if s == nil {
			s = &linkSet{}
			by[g] = s
		}
		for id := range ids {
			s.hashes = append(s.hashes, id)
		}
	}
	out := make(map[string]int64, len(by))
	for g, s := range by {
		out[g] = int64(s.estimate())
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
			if r.dim == dim && matched[r.value] && r.le && r.bf == r.bl && r.bf >= 1 && r.bf <= int64(n) && len(r.sets) > 0 {
				v, err := r.visitors()
				if err != nil {
					return nil, nil, err
				}
				*rows[r.bf-1].uniq += v
			}
		}
		return rows, bots, nil
	}
	vc, err := b.visitorCounts(ctx, p, site, dim, lo, end, starts, bucketGroup(starts), values, open)
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
// open part, visitors counted for the top values only (top < 0: none;
// 0: every value): the first top by the breakdown's order (primary count
// descending, then value) among those match keeps (nil: all). Merging
// visitor sets is most of a breakdown's cost, and the values past its
// limit show no visitors.
func (b *Backend) fastBreakdown(ctx context.Context, p *sitePlan, site string, lo, hi int64, dim string, top int, match func(string) bool) (map[string]*row, error) {
	rows, _, err := b.fastBreakdownOpen(ctx, p, site, lo, hi, dim, top, match)
	return rows, err
}

// fastBreakdownOpen is fastBreakdown, and the open part's visitor ids of
// each value.
func (b *Backend) fastBreakdownOpen(ctx context.Context, p *sitePlan, site string, lo, hi int64, dim string, top int, match func(string) bool) (map[string]*row, map[string]map[uint64]struct{}, error) {
	// Days neither cached nor merged here but stored in site_days are
	// summed in ClickHouse, their sets read for the values shown only.
	var stored []int64
	rs, err := b.planRows(ctx, p, site, dim, lo, questionCuts(p, lo, hi, nil), &stored)
	if err != nil {
		return nil, nil, err
	}
	acc := newCounterAcc(p, lo, hi, nil)
	acc.add(dim, rs)
	var ss *storedSums
	if len(stored) > 0 {
		vs := make([]uint64, len(stored))
		for i, d := range stored {
			vs[i] = p.dayVersion(d)
		}
		ss = &storedSums{where: fmt.Sprintf("site = %s AND dim = %s AND %s AND f >= %d AND f < %d AND l >= %d",
			String(site), String(dim), b.dayVersionCond(stored, vs), p.low, acc.hiH, acc.loH)}
		sums, err := b.storedCounters(ctx, ss)
		if err != nil {
			return nil, nil, err
		}
		b.fillDays(site, dim, stored, vs)
		for v, c := range sums {
			o := acc.row(counterKey{dim: dim, value: v, le: true})
			for n := range o.c {
				o.c[n] += c[n]
			}
		}
	}
	cr := acc.out
	out := make(map[string]*row, len(cr))
	get := func(v string) *row {
		r := out[v]
		if r == nil {
			r = newRow()
			out[v] = r
		}
		return r
	}
	sets := make(map[string][]*linkSet, len(cr))
	for i := range cr {
		get(cr[i].value).addCounters(&cr[i].c)
		sets[cr[i].value] = append(sets[cr[i].value], cr[i].sets...)
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
	values := make([]string, 0, len(out))
	for v := range out {
		if match == nil || match(v) {
			values = append(values, v)
		}
	}
	if top != 0 {
		slices.SortFunc(values, func(x, y string) int {
			mx, my := metricsOf(dim, out[x]), metricsOf(dim, out[y])
			if c := cmp.Compare(primary(dim, &my), primary(dim, &mx)); c != 0 {
				return c
			}
			return strings.Compare(x, y)
		})
		values = values[:max(0, min(top, len(values)))]
	}
	if ss != nil && top >= 0 {
		more, err := b.storedSets(ctx, ss, values)
		if err != nil {
			return nil, nil, err
		}
		for v, s := range more {
			sets[v] = append(sets[v], s...)
		}
	}
	for _, v := range values {
		var u linkSet
		for _, s := range sets[v] {
			if err := unionInto(&u, s); err != nil {
				return nil, nil, err
			}
		}
		for id := range open[v] {
			u.hashes = append(u.hashes, id)
		}
		n := int64(u.estimate())
		out[v].uniq = &n
	}
	for _, r := range out {
		if r.uniq == nil {
			var n int64
			r.uniq = &n
		}
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
	pages, pagesOpen, err := b.fastBreakdownOpen(ctx, p, site, lo, hi, "page", -1, nil)
	if err != nil {
		return 0, nil, err
	}
	names, err := b.fastBreakdown(ctx, p, site, lo, hi, "event", 0, nil)
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
				vc, err := b.visitorCounts(ctx, p, site, "page", lo, hi, nil, func(*siteRow) string { return "g" }, values, open)
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
