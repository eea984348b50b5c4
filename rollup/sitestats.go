package rollup

import (
	"fmt"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
)

// siteDims maps the API's site dimension names to rollup dimensions.
var siteDims = map[string]byte{
	"page": dimPage, "entry_page": dimEntryPage, "exit_page": dimExitPage,
	"referrer": dimReferrer, "source": dimSource,
	"utm_source": dimUTMSource, "utm_medium": dimUTMMedium, "utm_campaign": dimUTMCampaign,
	"utm_term": dimUTMTerm, "utm_content": dimUTMContent,
	"country": dimCountry, "device": dimDevice, "browser": dimBrowser, "os": dimOS,
	"region": dimRegion, "city": dimCity, "browser_version": dimBrowserVersion, "os_version": dimOSVersion,
	"event": dimEventName, "channel": dimChannel, "visitor_type": dimVisitorType,
}

// eventScoped dimensions count events where they happened; the others are
// visit-scoped: a visit, its pageviews and duration count under the values
// of its first event (or its entry and exit page).
func eventScoped(dim byte) bool { return dim == dimTotal || dim == dimPage || dim == dimEventName }

// metricsOf turns summed rows of one dimension into metrics, as Plausible
// defines them (rollup/DESIGN.md): c is the value's row; for a page, entry
// is the same value's entry-page row, whose visits give bounce rate and
// visit duration (Plausible answers session metrics by page from the
// sessions that entered there); otherwise entry is c.
func metricsOf(dim byte, c, entry *counters, visitors uint64) query.SiteMetrics {
	m := query.SiteMetrics{
		Visitors: visitors, Visits: c[fSessions], Pageviews: c[fCount], Events: c[fCount] + c[fEvents],
		BotEvents:     c[fBots],
		ViewsPerVisit: round2(ratio(c[fVisitPV], c[fSessions])),
		BounceRate:    roundEven(100 * ratio(entry[fBounces], entry[fSessions])),
		VisitDuration: roundEven(ratio(entry[fDurationMS], entry[fSessions]) / 1000),
		TimeOnPage:    roundEven(ratio(c[fEngagedMS], c[fEngVisits]) / 1000),
		ScrollDepth:   roundEven(ratio(c[fScrollSum], c[fEngVisits])),
	}
	if eventScoped(dim) && dim != dimTotal {
		m.Visits = c[fEventVisits]
	}
	return m
}

// filterOn checks that every filter names dimension name (or that there
// are none) and returns the combined match.
func filterOn(filters []query.DimFilter) (byte, func(string) bool, error) {
	if len(filters) == 0 {
		return dimTotal, nil, nil
	}
	dim, ok := siteDims[filters[0].Dimension]
	if !ok {
		return 0, nil, fmt.Errorf("%w: filter dimension %q", query.ErrUnsupportedQuery, filters[0].Dimension)
	}
	for _, f := range filters {
		switch {
		case f.Dimension != filters[0].Dimension:
			return 0, nil, fmt.Errorf("%w: filters on more than one dimension", query.ErrUnsupportedQuery)
		case f.Op != "is" && f.Op != "is_not" && f.Op != "contains":
			return 0, nil, fmt.Errorf("%w: filter operator %q", query.ErrUnsupportedQuery, f.Op)
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

// siteMetrics sums one range: rows of dim (all of them, or those match
// keeps) into one SiteMetrics.
func (a *Aggregator) siteMetrics(site string, dim byte, match func(string) bool, r query.Range) (query.SiteMetrics, error) {
	rows, err := a.rows(kindSite, site, dim, r, true, match)
	if err != nil {
		return query.SiteMetrics{}, err
	}
	var sum counters
	for _, c := range rows {
		sum.add(c)
	}
	var sks map[string]*visitorAcc
	if match == nil && dim == dimTotal {
		sks, err = a.setsOf(kindSite, site, dim, r, []string{""})
	} else {
		sks, err = a.sets(kindSite, site, dim, r, match, true)
	}
	if err != nil {
		return query.SiteMetrics{}, err
	}
	m := metricsOf(dim, &sum, &sum, estimateOf(sks[""]))
	if dim != dimTotal {
		// Bots are kept on the total row only.
		tot, err := a.rows(kindSite, site, dimTotal, r, true, nil)
		if err != nil {
			return query.SiteMetrics{}, err
		}
		if c := tot[""]; c != nil {
			m.BotEvents = c[fBots]
		}
	}
	return m, nil
}

// SiteAggregate returns a site's metrics over r; filters (combined with
// AND) narrow it. Filters on one dimension are answered from the rollups;
// on several, exactly from the raw events (rawquery.go), visitors exact.
func (a *Aggregator) SiteAggregate(site string, r query.Range, filters []query.DimFilter) (query.SiteMetrics, error) {
	if err := query.CheckRange(r); err != nil {
		return query.SiteMetrics{}, err
	}
	if query.NeedsRaw("", filters) {
		if err := a.enter(); err != nil {
			return query.SiteMetrics{}, err
		}
		defer a.leave()
		rows, err := a.rawSite(site, r, "", "", filters)
		if err != nil || len(rows) == 0 {
			return query.SiteMetrics{}, err
		}
		return rows[0].M, nil
	}
	dim, match, err := filterOn(filters)
	if err != nil {
		return query.SiteMetrics{}, err
	}
	if err := a.enter(); err != nil {
		return query.SiteMetrics{}, err
	}
	defer a.leave()
	return a.siteMetrics(site, dim, match, r)
}

// SiteTimeseries returns the site's metrics per bucket of g over r.
func (a *Aggregator) SiteTimeseries(site string, r query.Range, g query.Granularity, filters []query.DimFilter) ([]query.SitePoint, error) {
	if err := query.CheckRange(r); err != nil {
		return nil, err
	}
	buckets, err := r.Buckets(g)
	if err != nil {
		return nil, err
	}
	for i := range buckets {
		buckets[i].From = maxTime(buckets[i].From, r.From)
		buckets[i].To = minTime(buckets[i].To, r.To)
	}
	if query.NeedsRaw("", filters) {
		if err := a.enter(); err != nil {
			return nil, err
		}
		defer a.leave()
		rows, err := a.rawSite(site, r, g, "", filters)
		if err != nil {
			return nil, err
		}
		byLabel := make(map[string]query.SiteMetrics, len(rows))
		for _, row := range rows {
			byLabel[row.Key] = row.M
		}
		out := make([]query.SitePoint, 0, len(buckets))
		for _, b := range buckets {
			out = append(out, query.SitePoint{T: b.From, SiteMetrics: byLabel[query.BucketLabel(b.From.In(r.Location()), g)]})
		}
		return out, nil
	}
	dim, match, err := filterOn(filters)
	if err != nil {
		return nil, err
	}
	if err := a.enter(); err != nil {
		return nil, err
	}
	defer a.leave()
	out := make([]query.SitePoint, 0, len(buckets))
	for _, b := range buckets {
		m, err := a.siteMetrics(site, dim, match, b)
		if err != nil {
			return nil, err
		}
		out = append(out, query.SitePoint{T: b.From, SiteMetrics: m})
	}
	return out, nil
}

// primary is the count a breakdown sorts and shares by.
func primary(dim byte, c *counters) int64 {
	switch dim {
	case dimPage:
		return c[fCount]
	case dimEventName:
		return c[fEvents]
	}
	return c[fSessions]
}

// SiteBreakdown returns the top limit values of a dimension over r.
// Filters on another dimension are answered from the raw events.
func (a *Aggregator) SiteBreakdown(site, dimension string, r query.Range, limit int, filters []query.DimFilter) (*query.SiteBreakdown, error) {
	dim, ok := siteDims[dimension]
	if !ok {
		return nil, fmt.Errorf("%w: dimension %q", query.ErrUnsupportedQuery, dimension)
	}
	if err := query.CheckRange(r); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 10
	}
	if query.NeedsRaw(dimension, filters) {
		return a.rawBreakdown(site, dimension, dim, r, limit, filters)
	}
	fdim, match, err := filterOn(filters)
	if err != nil {
		return nil, err
	}
	if match != nil && fdim != dim {
		return nil, fmt.Errorf("%w: a breakdown by %s filtered on another dimension", query.ErrUnsupportedQuery, dimension)
	}
	if err := a.enter(); err != nil {
		return nil, err
	}
	defer a.leave()
	rows, err := a.rows(kindSite, site, dim, r, true, match)
	if err != nil {
		return nil, err
	}
	out := &query.SiteBreakdown{Dimension: dimension, Results: []query.SiteBreakdownRow{}, Estimated: []string{"visitors"}}
	type valued struct {
		value string
		c     *counters
	}
	all := make([]valued, 0, len(rows))
	for v, c := range rows {
		all = append(all, valued{v, c})
		out.Total += primary(dim, c)
	}
	sortByCount(all, func(x *valued) int64 { return primary(dim, x.c) }, func(x *valued) string { return x.value })
	if len(all) > limit {
		for _, x := range all[limit:] {
			out.Other += primary(dim, x.c)
		}
		all = all[:limit]
	}
	keep := make([]string, 0, len(all))
	for _, x := range all {
		keep = append(keep, x.value)
	}
	sks, err := a.setsOf(kindSite, site, dim, r, keep)
	if err != nil {
		return nil, err
	}
	for _, x := range all {
		row := query.SiteBreakdownRow{Value: x.value, SiteMetrics: metricsOf(dim, x.c, x.c, estimateOf(sks[x.value]))}
		row.Share = round4(ratio(primary(dim, x.c), out.Total))
		out.Results = append(out.Results, row)
	}
	return out, nil
}

// rawBreakdown answers a breakdown filtered on other dimensions from the
// raw events.
func (a *Aggregator) rawBreakdown(site, dimension string, dim byte, r query.Range, limit int, filters []query.DimFilter) (*query.SiteBreakdown, error) {
	if err := a.enter(); err != nil {
		return nil, err
	}
	defer a.leave()
	rows, err := a.rawSite(site, r, "", dimension, filters)
	if err != nil {
		return nil, err
	}
	out := &query.SiteBreakdown{Dimension: dimension, Results: []query.SiteBreakdownRow{}, Estimated: []string{}, FromRawEvents: true}
	primaryOf := func(m *query.SiteMetrics) int64 {
		switch dim {
		case dimPage:
			return m.Pageviews
		case dimEventName:
			return m.Events
		}
		return m.Visits
	}
	for i := range rows {
		out.Total += primaryOf(&rows[i].M)
	}
	sortByCount(rows, func(x *query.RawRow) int64 { return primaryOf(&x.M) }, func(x *query.RawRow) string { return x.Key })
	if len(rows) > limit {
		for i := range rows[limit:] {
			out.Other += primaryOf(&rows[limit+i].M)
		}
		rows = rows[:limit]
	}
	for _, x := range rows {
		row := query.SiteBreakdownRow{Value: x.Key, SiteMetrics: x.M}
		row.Share = round4(ratio(primaryOf(&x.M), out.Total))
		out.Results = append(out.Results, row)
	}
	return out, nil
}

func maxTime(x, y time.Time) time.Time {
	if x.After(y) {
		return x
	}
	return y
}

func minTime(x, y time.Time) time.Time {
	if x.Before(y) {
		return x
	}
	return y
}

// SiteRealtime counts the site's current visitors and recent pageviews.
func (a *Aggregator) SiteRealtime(site string) (*query.SiteRealtime, error) {
	if err := a.enter(); err != nil {
		return nil, err
	}
	defer a.leave()
	now := a.cfg.Now()
	nowMS := now.UnixMilli()
	out := &query.SiteRealtime{TopPages: []query.RealtimeRow{}}
	visitors := make(map[uint64]struct{})
	pages := make(map[string]int64)
	err := a.realtimeScan(now.Add(-30*time.Minute), func(ev *ingest.Event) error {
		t := ev.Time
		if t > nowMS {
			return nil
		}
		if ev.SiteID != site || ev.Bot() {
			return nil
		}
		recent := t >= nowMS-5*60_000
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
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot read realtime events: %w", err)
	}
	out.CurrentVisitors = len(visitors)
	for p, n := range pages {
		out.TopPages = append(out.TopPages, query.RealtimeRow{Value: p, Pageviews: n})
	}
	sortByCount(out.TopPages, func(x *query.RealtimeRow) int64 { return x.Pageviews }, func(x *query.RealtimeRow) string { return x.Value })
	if len(out.TopPages) > 10 {
		out.TopPages = out.TopPages[:10]
	}
	return out, nil
}
