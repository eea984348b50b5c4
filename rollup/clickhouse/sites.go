package clickhouse

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
	"github.com/waymark/waymark/store"
)

// Site questions: the site's raw events of the range (and the visits
// reaching into it) are read once, cut into visits (sessions.go) and
// counted as the embedded store's rows count them. Bot events, which
// those rows only total, are a countIf in SQL.

// siteWindow reads the events a question over [lo, hi) needs and cuts
// them into visits: from the UTC midnight before lo (a visitor's earlier
// visit that day makes it returning; the hash before midnight finds a
// visit going on past it) and an hour past hi, widened, doubling, while a
// visit reaching the range touches an edge of the window: back at most 7
// days, forward until 30 minutes past now.
func (b *Backend) siteWindow(ctx context.Context, site string, lo, hi int64, cols colSet) (*siteData, error) {
	dayStart := floorDiv(lo, 24*msPerHour) * 24 * msPerHour
	from := min(lo-msPerHour, dayStart-visitGapMS)
	return b.window(ctx, site, nil, from, hi+msPerHour, lo, hi, lo-7*24*msPerHour-visitGapMS, cols)
}

// window reads the site's events [from, to) after the visits of seed and
// cuts them into visits, widening back (not past limitBack) and forward
// while a visit that reaches [lo, hi) touches an edge.
func (b *Backend) window(ctx context.Context, site string, seed []carriedVisit, from, to, lo, hi, limitBack int64, cols colSet) (*siteData, error) {
	limitFwd := b.cfg.Now().UnixMilli() + visitGapMS
	load := func(from, to int64) ([]storedEvent, error) {
		evs, err := b.c.loadSiteEvents(ctx, site, from, to, b.cfg.MaxEvents, cols)
		if errors.Is(err, errTooManyEvents) {
			return nil, fmt.Errorf("%w: %v", query.ErrUnsupportedQuery, err)
		}
		return evs, err
	}
	evs, err := load(from, to)
	if err != nil {
		return nil, err
	}
	margin := msPerHour
	for {
		d := sessionizeFrom(seed, evs)
		back, fwd := false, false
		for i := range d.visits {
			v := &d.visits[i]
			if v.alive < lo-visitGapMS || v.start >= hi {
				continue
			}
			back = back || v.start-from <= visitGapMS
			fwd = fwd || to-v.alive <= visitGapMS
		}
		for i := range d.evs { // an engagement whose visit began before the window
			if d.evs[i].Time-from > visitGapMS {
				break
			}
			back = back || (d.of[i] < 0 && d.evs[i].Kind == ingest.KindEngagement)
		}
		back = back && from > limitBack
		fwd = fwd && to < limitFwd
		if !back && !fwd {
			if len(evs) > b.cfg.MaxEvents {
				return nil, fmt.Errorf("%w: %v: more than %d in the range", query.ErrUnsupportedQuery, errTooManyEvents, b.cfg.MaxEvents)
			}
			return d, nil
		}
		// Only the events of the widening are read; the windows are
		// disjoint, so the order holds.
		margin *= 2
		if back {
			nf := max(from-margin, limitBack)
			more, err := load(nf, from)
			if err != nil {
				return nil, err
			}
			evs = append(more, evs...)
			from = nf
		}
		if fwd {
			nt := min(to+margin, limitFwd)
			more, err := load(to, nt)
			if err != nil {
				return nil, err
			}
			evs = append(evs, more...)
			to = nt
		}
	}
}

// metricsOf is a row's metrics, as the embedded store rounds them.
func metricsOf(dim string, r *row) query.SiteMetrics {
	if r == nil {
		return query.SiteMetrics{}
	}
	m := query.SiteMetrics{
		Visitors: r.visitorCount(), Visits: r.visits, Pageviews: r.pageviews, Events: r.events,
		ViewsPerVisit: round2(ratio(r.visitPV, r.sessions)),
		BounceRate:    roundEven(100 * ratio(r.bounces, r.sessions)),
		VisitDuration: roundEven(ratio(r.durationS, r.sessions)),
		TimeOnPage:    roundEven(ratio(r.engagedMS, r.engVisits) / 1000),
		ScrollDepth:   roundEven(ratio(r.scrollSum, r.engVisits)),
	}
	// What the embedded store's rows of each kind of dimension hold: no
	// session metrics under a page or an event name, no pageviews or
	// engagement under an entry or exit page, no engagement under the
	// other visit dimensions.
	switch dim {
	case "":
	case "page", "event":
		m.ViewsPerVisit, m.BounceRate, m.VisitDuration = 0, 0, 0
	case "entry_page", "exit_page":
		m.Pageviews, m.Events, m.TimeOnPage, m.ScrollDepth = 0, 0, 0, 0
	default:
		m.TimeOnPage, m.ScrollDepth = 0, 0
	}
	return m
}

// filterDim checks filters the rows can answer (all on one dimension) and
// returns that dimension ("" without filters) and the match.
func filterDim(filters []query.DimFilter) (string, func(string) bool, error) {
	if len(filters) == 0 {
		return "", nil, nil
	}
	dim := filters[0].Dimension
	for _, f := range filters {
		switch {
		case !isSiteDim(f.Dimension):
			return "", nil, fmt.Errorf("%w: filter dimension %q", query.ErrUnsupportedQuery, f.Dimension)
		case f.Dimension != dim:
			return "", nil, fmt.Errorf("%w: filters on more than one dimension", query.ErrUnsupportedQuery)
		case f.Op != "is" && f.Op != "is_not" && f.Op != "contains":
			return "", nil, fmt.Errorf("%w: filter operator %q", query.ErrUnsupportedQuery, f.Op)
		}
	}
	return dim, func(v string) bool {
		for i := range filters {
			if !filters[i].Match(v) {
				return false
			}
		}
		return true
	}, nil
}

func isSiteDim(d string) bool { return slices.Contains(query.SiteDimensions, d) }

// filtered sums the rows of dim whose value matches (the whole site
// without a filter).
func (d *siteData) filtered(lo, hi int64, dim string, match func(string) bool) *row {
	return d.filteredFrom(lo, hi, dim, match, math.MinInt64)
}

// filteredFrom is filtered over the visits that start at or after from.
func (d *siteData) filteredFrom(lo, hi int64, dim string, match func(string) bool, from int64) *row {
	rows := d.rowsFrom(lo, hi, dim, from)
	out := newRow()
	for v, r := range rows {
		if match == nil || match(v) {
			out.add(r)
		}
	}
	return out
}

// botEvents counts the site's bot events at or after floor in each
// bucket [starts[i], starts[i+1]) (the last ending at end).
func (b *Backend) botEvents(ctx context.Context, site string, starts []int64, end, floor int64) ([]int64, error) {
	out := make([]int64, len(starts))
	res, err := b.c.Query(ctx, "SELECT "+bucketExpr(starts)+" AS bk, count() FROM events FINAL WHERE site = "+String(site)+
		" AND code = '' AND "+kindSite+" AND "+isBot+" AND "+timeIn(max(starts[0], floor), end)+" GROUP BY bk")
	if err != nil {
		return nil, fmt.Errorf("cannot count bot events: %w", err)
	}
	for _, raw := range res.Data {
		row := rawRow(raw)
		k, err1 := row[0].int()
		n, err2 := row[1].int()
		if err := firstErr([]error{err1, err2}); err != nil {
			return nil, fmt.Errorf("cannot count bot events: %w", err)
		}
		if k >= 1 && int(k) <= len(out) {
			out[k-1] = n
		}
	}
	return out, nil
}

// SiteAggregate is a site's metrics over r, narrowed by filters.
func (b *Backend) SiteAggregate(site string, r query.Range, filters []query.DimFilter) (query.SiteMetrics, error) {
	if err := query.CheckRange(r); err != nil {
		return query.SiteMetrics{}, err
	}
	if err := b.enter(); err != nil {
		return query.SiteMetrics{}, err
	}
	defer b.leave()
	ctx, cancel := b.ctx()
	defer cancel()
	if query.NeedsRaw("", filters) {
		rows, err := b.rawSite(ctx, site, r, "", "", filters)
		if err != nil || len(rows) == 0 {
			return query.SiteMetrics{}, err
		}
		return rows[0].M, nil
	}
	dim, match, err := filterDim(filters)
	if err != nil {
		return query.SiteMetrics{}, err
	}
	lo, hi := hourBounds(r)
	p, err := b.plan(ctx, site, lo, hi)
	if err != nil {
		return query.SiteMetrics{}, err
	}
	if p != nil {
		b.c.m.siteFast.Inc()
		rows, bots, err := b.fastBuckets(ctx, p, site, []int64{lo}, hi, dim, match)
		if err != nil {
			return query.SiteMetrics{}, err
		}
		m := metricsOf(dim, rows[0])
		m.BotEvents = bots[0]
		return m, nil
	}
	b.c.m.siteRaw.Inc()
	d, err := b.siteWindow(ctx, site, lo, hi, dimCols[dim])
	if err != nil {
		return query.SiteMetrics{}, err
	}
	m := metricsOf(dim, d.filtered(lo, hi, dim, match))
	bots, err := b.botEvents(ctx, site, []int64{lo}, hi, noFloor)
	if err != nil {
		return query.SiteMetrics{}, err
	}
	m.BotEvents = bots[0]
	return m, nil
}

// SiteTimeseries is the site's metrics per bucket of g over r; each
// bucket counts as an aggregate over it does (the visits it overlaps).
func (b *Backend) SiteTimeseries(site string, r query.Range, g query.Granularity, filters []query.DimFilter) ([]query.SitePoint, error) {
	if err := query.CheckRange(r); err != nil {
		return nil, err
	}
	buckets, starts, end, err := clippedBuckets(r, g)
	if err != nil {
		return nil, err
	}
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	ctx, cancel := b.ctx()
	defer cancel()
	if query.NeedsRaw("", filters) {
		rows, err := b.rawSite(ctx, site, r, g, "", filters)
		if err != nil {
			return nil, err
		}
		byLabel := make(map[string]query.SiteMetrics, len(rows))
		for _, row := range rows {
			byLabel[row.Key] = row.M
		}
		out := make([]query.SitePoint, 0, len(buckets))
		for _, bk := range buckets {
			out = append(out, query.SitePoint{T: bk.From, SiteMetrics: byLabel[query.BucketLabel(bk.From.In(r.Location()), g)]})
		}
		return out, nil
	}
	dim, match, err := filterDim(filters)
	if err != nil {
		return nil, err
	}
	out := make([]query.SitePoint, len(buckets))
	if contiguous(buckets, starts, end) {
		p, err := b.plan(ctx, site, starts[0], end)
		if err != nil {
			return nil, err
		}
		if p != nil {
			b.c.m.siteFast.Inc()
			rows, bots, err := b.fastBuckets(ctx, p, site, starts, end, dim, match)
			if err != nil {
				return nil, err
			}
			for i, bk := range buckets {
				out[i] = query.SitePoint{T: bk.From, SiteMetrics: metricsOf(dim, rows[i])}
				out[i].BotEvents = bots[i]
			}
			return out, nil
		}
	}
	b.c.m.siteRaw.Inc()
	d, err := b.siteWindow(ctx, site, starts[0], end, dimCols[dim])
	if err != nil {
		return nil, err
	}
	bots, err := b.botEvents(ctx, site, starts, end, noFloor)
	if err != nil {
		return nil, err
	}
	for i, bk := range buckets {
		lo, hi := hourBounds(bk)
		out[i] = query.SitePoint{T: bk.From, SiteMetrics: metricsOf(dim, d.filtered(lo, hi, dim, match))}
		out[i].BotEvents = bots[i]
	}
	return out, nil
}

// contiguous reports whether each bucket, at whole hours, ends where the
// next starts (the last at end): site rows answer such series; a zone
// whose offset is not whole hours makes neighbours overlap by an hour.
func contiguous(buckets []query.Range, starts []int64, end int64) bool {
	for i, bk := range buckets {
		_, hi := hourBounds(bk)
		next := end
		if i+1 < len(starts) {
			next = starts[i+1]
		}
		if hi != next {
			return false
		}
	}
	return true
}

// primary is a breakdown's ordering count: pageviews for page, events for
// event, visits otherwise.
func primary(dim string, m *query.SiteMetrics) int64 {
	switch dim {
	case "page":
		return m.Pageviews
	case "event":
		return m.Events
	}
	return m.Visits
}

// SiteBreakdown is the top limit values of a site dimension over r.
func (b *Backend) SiteBreakdown(site, dimension string, r query.Range, limit int, filters []query.DimFilter) (*query.SiteBreakdown, error) {
	if !isSiteDim(dimension) {
		return nil, fmt.Errorf("%w: dimension %q", query.ErrUnsupportedQuery, dimension)
	}
	if err := query.CheckRange(r); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 10
	}
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	ctx, cancel := b.ctx()
	defer cancel()
	out := &query.SiteBreakdown{Dimension: dimension, Results: []query.SiteBreakdownRow{}, Estimated: []string{}}
	var all []query.SiteBreakdownRow
	if query.NeedsRaw(dimension, filters) {
		rows, err := b.rawSite(ctx, site, r, "", dimension, filters)
		if err != nil {
			return nil, err
		}
		out.FromRawEvents = true
		for _, x := range rows {
			all = append(all, query.SiteBreakdownRow{Value: x.Key, SiteMetrics: x.M})
		}
	} else {
		fdim, match, err := filterDim(filters)
		if err != nil {
			return nil, err
		}
		if match != nil && fdim != dimension {
			return nil, fmt.Errorf("%w: a breakdown by %s filtered on another dimension", query.ErrUnsupportedQuery, dimension)
		}
		lo, hi := hourBounds(r)
		p, err := b.plan(ctx, site, lo, hi)
		if err != nil {
			return nil, err
		}
		var rows map[string]*row
		if p != nil {
			b.c.m.siteFast.Inc()
			if rows, err = b.fastBreakdown(ctx, p, site, lo, hi, dimension, limit, match); err != nil {
				return nil, err
			}
			out.Estimated = siteEstimated
		} else {
			b.c.m.siteRaw.Inc()
			d, err := b.siteWindow(ctx, site, lo, hi, dimCols[dimension]|dimCols[fdim])
			if err != nil {
				return nil, err
			}
			rows = d.rowsBy(lo, hi, dimension)
		}
		for v, x := range rows {
			if match != nil && !match(v) {
				continue
			}
			all = append(all, query.SiteBreakdownRow{Value: v, SiteMetrics: metricsOf(dimension, x)})
		}
	}
	for i := range all {
		out.Total += primary(dimension, &all[i].SiteMetrics)
	}
	slices.SortFunc(all, func(x, y query.SiteBreakdownRow) int {
		if c := cmp.Compare(primary(dimension, &y.SiteMetrics), primary(dimension, &x.SiteMetrics)); c != 0 {
			return c
		}
		return strings.Compare(x.Value, y.Value)
	})
	if len(all) > limit {
		for i := range all[limit:] {
			out.Other += primary(dimension, &all[limit+i].SiteMetrics)
		}
		all = all[:limit]
	}
	for _, x := range all {
		x.Share = round4(ratio(primary(dimension, &x.SiteMetrics), out.Total))
		out.Results = append(out.Results, x)
	}
	var err error
	if out.DroppedEvents, err = b.dropped(ctx, ingest.ScopeSite, site, r); err != nil {
		return nil, err
	}
	return out, nil
}

// SiteRealtime counts the site's current visitors (distinct hashes with a
// non-bot event in the last 5 minutes) and recent pageviews.
func (b *Backend) SiteRealtime(site string) (*query.SiteRealtime, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	ctx, cancel := b.ctx()
	defer cancel()
	now := b.cfg.Now().UnixMilli()
	evs, err := b.c.loadSiteEvents(ctx, site, now-30*60_000, now+1, b.cfg.MaxEvents, colPath)
	if err != nil {
		return nil, fmt.Errorf("cannot read realtime events: %w", err)
	}
	out := &query.SiteRealtime{TopPages: []query.RealtimeRow{}}
	visitors := make(map[uint64]struct{})
	pages := make(map[string]int64)
	for i := range evs {
		ev := &evs[i]
		recent := ev.Time >= now-5*60_000
		if recent {
			visitors[ev.VisitorHash] = struct{}{}
		}
		if ev.Kind == ingest.KindPageview {
			out.Pageviews30Min++
			if recent {
				out.Pageviews5Minutes++
				pages[ev.Path]++
			}
		}
	}
	out.CurrentVisitors = len(visitors)
	for p, n := range pages {
		out.TopPages = append(out.TopPages, query.RealtimeRow{Value: p, Pageviews: n})
	}
	slices.SortFunc(out.TopPages, func(x, y query.RealtimeRow) int {
		if c := cmp.Compare(y.Pageviews, x.Pageviews); c != 0 {
			return c
		}
		return strings.Compare(x.Value, y.Value)
	})
	if len(out.TopPages) > 10 {
		out.TopPages = out.TopPages[:10]
	}
	return out, nil
}

var weekdayNames = [7]string{"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}

// SiteHeatmap adds the site's hours over r up by weekday and hour in r's
// zone: pageviews in the hour, and the visits active in it (from the hour
// of their first event to that of their last activity). Read from at most
// HourRetention back, as the embedded hour tier.
func (b *Backend) SiteHeatmap(site string, r query.Range) (*query.Heatmap, error) {
	if err := query.CheckRange(r); err != nil {
		return nil, err
	}
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	ctx, cancel := b.ctx()
	defer cancel()
	loc := r.Location()
	now := b.cfg.Now()
	lo, hi := hourBounds(r)
	hi = min(hi, floorHour(now)+msPerHour)
	out := &query.Heatmap{From: r.From, To: r.To, Timezone: loc.String(), Weekdays: weekdayNames}
	if cut := floorHour(now.Add(-b.cfg.HourRetention)); lo < cut {
		out.Clipped = true
		lo = cut
	}
	out.HoursFrom = time.UnixMilli(lo).In(loc)
	if hi <= lo {
		return out, nil
	}
	d, err := b.siteWindow(ctx, site, lo, hi, 0)
	if err != nil {
		return nil, err
	}
	cell := func(h int64) (int, int) {
		t := time.UnixMilli(h * msPerHour).In(loc)
		return (int(t.Weekday()) + 6) % 7, t.Hour()
	}
	i, j := d.span(lo, hi)
	for k := i; k < j; k++ {
		if d.evs[k].Kind == ingest.KindPageview && d.of[k] >= 0 {
			wd, hr := cell(floorDiv(d.evs[k].Time, msPerHour))
			out.Pageviews[wd][hr]++
		}
	}
	for vi := range d.visits {
		v := &d.visits[vi]
		if !v.counted() {
			continue
		}
		h0 := max(floorDiv(v.start, msPerHour), lo/msPerHour)
		h1 := min(floorDiv(v.alive, msPerHour), hi/msPerHour-1)
		for h := h0; h <= h1; h++ {
			wd, hr := cell(h)
			out.Visits[wd][hr]++
		}
	}
	for wd := range out.Pageviews {
		for hr := range out.Pageviews[wd] {
			pv, v := out.Pageviews[wd][hr], out.Visits[wd][hr]
			out.Total.Pageviews += pv
			out.Total.Visits += v
			out.Max.Pageviews = max(out.Max.Pageviews, pv)
			out.Max.Visits = max(out.Max.Visits, v)
		}
	}
	return out, nil
}

// SiteGoalStats is the conversions of each goal over r: visitors with a
// custom event of the name, or with a pageview of a page the pattern
// matches, and those events.
func (b *Backend) SiteGoalStats(site string, goals []store.Goal, r query.Range) (*query.SiteGoals, error) {
	if err := query.CheckRange(r); err != nil {
		return nil, err
	}
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	ctx, cancel := b.ctx()
	defer cancel()
	out := &query.SiteGoals{From: r.From, To: r.To, Timezone: r.Location().String(), Goals: []query.GoalStat{}, Estimated: []string{}}
	lo, hi := hourBounds(r)
	p, err := b.plan(ctx, site, lo, hi)
	if err != nil {
		return nil, err
	}
	if p != nil {
		b.c.m.siteFast.Inc()
		if out.TotalVisitors, out.Goals, err = b.fastGoals(ctx, p, site, lo, hi, goals); err != nil {
			return nil, err
		}
		out.Estimated = siteGoalsEstimated
		sortGoals(out)
		return out, nil
	}
	b.c.m.siteRaw.Inc()
	d, err := b.siteWindow(ctx, site, lo, hi, colPath|colName)
	if err != nil {
		return nil, err
	}
	out.TotalVisitors = uint64(len(d.filtered(lo, hi, "", nil).visitors))
	pages := d.rowsBy(lo, hi, "page")
	names := d.rowsBy(lo, hi, "event")
	for i := range goals {
		g := &goals[i]
		st := query.GoalStat{ID: g.ID, DisplayName: g.DisplayName, GoalType: g.Type()}
		converted := make(map[uint64]struct{})
		if g.IsPage() {
			p := g.PagePath
			st.PagePath = &p
			m := g.Matcher()
			for v, x := range pages {
				if x.pageviews > 0 && m.MatchPage(v) {
					st.Events += x.pageviews
					for h := range x.visitors {
						converted[h] = struct{}{}
					}
				}
			}
		} else {
			n := g.EventName
			st.EventName = &n
			if x := names[n]; x != nil {
				st.Events = x.events
				converted = x.visitors
			}
		}
		st.Visitors = min(uint64(len(converted)), out.TotalVisitors)
		out.Goals = append(out.Goals, st)
	}
	sortGoals(out)
	return out, nil
}

// sortGoals sets each goal's conversion rate and orders them by visitors,
// then name.
func sortGoals(out *query.SiteGoals) {
	for i := range out.Goals {
		if st := &out.Goals[i]; out.TotalVisitors > 0 {
			st.ConversionRate = round2(float64(st.Visitors) / float64(out.TotalVisitors) * 100)
		}
	}
	slices.SortStableFunc(out.Goals, func(x, y query.GoalStat) int {
		if c := cmp.Compare(y.Visitors, x.Visitors); c != 0 {
			return c
		}
		return strings.Compare(x.DisplayName, y.DisplayName)
	})
}

// SiteStatsStart is the UTC midnight of the site's oldest held event.
func (b *Backend) SiteStatsStart(site string) (time.Time, error) {
	if err := b.enter(); err != nil {
		return time.Time{}, err
	}
	defer b.leave()
	ctx, cancel := b.ctx()
	defer cancel()
	res, err := b.c.Query(ctx, "SELECT count(), toUInt32(min(time)) FROM events FINAL WHERE site = "+String(site)+" AND code = '' AND "+kindSite)
	if err != nil {
		return time.Time{}, fmt.Errorf("cannot read the stats start of site %q: %w", site, err)
	}
	if len(res.Data) != 1 {
		return time.Time{}, nil
	}
	row := rawRow(res.Data[0])
	n, err1 := row[0].int()
	sec, err2 := row[1].int()
	if err := firstErr([]error{err1, err2}); err != nil {
		return time.Time{}, fmt.Errorf("cannot read the stats start of site %q: %w", site, err)
	}
	if n == 0 {
		return time.Time{}, nil
	}
	return time.Unix(sec, 0).UTC().Truncate(24 * time.Hour), nil
}

// DroppedEvents is how many events of one link or site the edges dropped
// unwritten in the UTC hours r touches.
func (b *Backend) DroppedEvents(scope ingest.Scope, name string, r query.Range) (int64, error) {
	if err := b.enter(); err != nil {
		return 0, err
	}
	defer b.leave()
	ctx, cancel := b.ctx()
	defer cancel()
	return b.dropped(ctx, scope, name, r)
}

func (b *Backend) dropped(ctx context.Context, scope ingest.Scope, name string, r query.Range) (int64, error) {
	lo, hi := hourBounds(r)
	if hi <= lo {
		return 0, nil
	}
	res, err := b.c.Query(ctx, fmt.Sprintf("SELECT sum(count) FROM drop_tallies FINAL WHERE scope = %d AND name = %s AND hour >= toDateTime(%d) AND hour < toDateTime(%d)",
		scope, String(name), lo/1000, hi/1000))
	if err != nil {
		return 0, fmt.Errorf("cannot read drop tallies: %w", err)
	}
	if len(res.Data) != 1 {
		return 0, nil
	}
	return rawRow(res.Data[0])[0].int()
}
