package rollup

import (
	"fmt"
	"strings"
	"time"

	"github.com/waymark/waymark/ingest"
)

// SiteMetrics are a site's metrics over a range (or for one breakdown
// value); the package doc defines each. Visitors is an estimate.
type SiteMetrics struct {
	Visitors      uint64  `json:"visitors"`
	Visits        int64   `json:"visits"`
	Pageviews     int64   `json:"pageviews"`
	ViewsPerVisit float64 `json:"views_per_visit"`
	BounceRate    float64 `json:"bounce_rate"`    // percent, 0-100
	VisitDuration float64 `json:"visit_duration"` // seconds
	TimeOnPage    float64 `json:"time_on_page"`   // seconds
	ScrollDepth   float64 `json:"scroll_depth"`   // percent, 0-100
	Events        int64   `json:"events"`
	BotEvents     int64   `json:"bot_events"`
}

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
func metricsOf(dim byte, c, entry *counters, visitors uint64) SiteMetrics {
	m := SiteMetrics{
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

// DimFilter keeps the rows of one dimension whose value matches: Op is
// "is", "is_not" or "contains" (any of Values).
type DimFilter struct {
	Dimension string
	Op        string
	Values    []string
}

func (f *DimFilter) match(v string) bool {
	any := false
	for _, w := range f.Values {
		switch f.Op {
		case "is", "is_not":
			any = any || v == w
		case "contains":
			any = any || strings.Contains(strings.ToLower(v), strings.ToLower(w))
		}
	}
	if f.Op == "is_not" {
		return !any
	}
	return any
}

// filterOn checks that every filter names dimension name (or that there
// are none) and returns the combined match.
func filterOn(filters []DimFilter) (byte, func(string) bool, error) {
	if len(filters) == 0 {
		return dimTotal, nil, nil
	}
	dim, ok := siteDims[filters[0].Dimension]
	if !ok {
		return 0, nil, fmt.Errorf("%w: filter dimension %q", ErrUnsupportedQuery, filters[0].Dimension)
	}
	for _, f := range filters {
		switch {
		case f.Dimension != filters[0].Dimension:
			return 0, nil, fmt.Errorf("%w: filters on more than one dimension", ErrUnsupportedQuery)
		case f.Op != "is" && f.Op != "is_not" && f.Op != "contains":
			return 0, nil, fmt.Errorf("%w: filter operator %q", ErrUnsupportedQuery, f.Op)
		}
	}
	return dim, func(v string) bool {
		for i := range filters {
			if !filters[i].match(v) {
				return false
			}
		}
		return true
	}, nil
}

// siteMetrics sums one range: rows of dim (all of them, or those match
// keeps) into one SiteMetrics.
func (a *Aggregator) siteMetrics(site string, dim byte, match func(string) bool, r Range) (SiteMetrics, error) {
	rows, err := a.rows(kindSite, site, dim, r, true, match)
	if err != nil {
		return SiteMetrics{}, err
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
		return SiteMetrics{}, err
	}
	m := metricsOf(dim, &sum, &sum, estimateOf(sks[""]))
	if dim != dimTotal {
		// Bots are kept on the total row only.
		tot, err := a.rows(kindSite, site, dimTotal, r, true, nil)
		if err != nil {
			return SiteMetrics{}, err
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
func (a *Aggregator) SiteAggregate(site string, r Range, filters []DimFilter) (SiteMetrics, error) {
	if err := checkRange(r); err != nil {
		return SiteMetrics{}, err
	}
	if needsRaw("", filters) {
		if err := a.enter(); err != nil {
			return SiteMetrics{}, err
		}
		defer a.leave()
		rows, err := a.rawSite(site, r, "", "", filters)
		if err != nil || len(rows) == 0 {
			return SiteMetrics{}, err
		}
		return rows[0].m, nil
	}
	dim, match, err := filterOn(filters)
	if err != nil {
		return SiteMetrics{}, err
	}
	if err := a.enter(); err != nil {
		return SiteMetrics{}, err
	}
	defer a.leave()
	return a.siteMetrics(site, dim, match, r)
}

// SitePoint is one bucket of a site's time series.
type SitePoint struct {
	T time.Time `json:"t"`
	SiteMetrics
}

// SiteTimeseries returns the site's metrics per bucket of g over r.
func (a *Aggregator) SiteTimeseries(site string, r Range, g Granularity, filters []DimFilter) ([]SitePoint, error) {
	if err := checkRange(r); err != nil {
		return nil, err
	}
	buckets, err := r.buckets(g)
	if err != nil {
		return nil, err
	}
	for i := range buckets {
		buckets[i].From = maxTime(buckets[i].From, r.From)
		buckets[i].To = minTime(buckets[i].To, r.To)
	}
	if needsRaw("", filters) {
		if err := a.enter(); err != nil {
			return nil, err
		}
		defer a.leave()
		rows, err := a.rawSite(site, r, g, "", filters)
		if err != nil {
			return nil, err
		}
		byLabel := make(map[string]SiteMetrics, len(rows))
		for _, row := range rows {
			byLabel[row.key] = row.m
		}
		out := make([]SitePoint, 0, len(buckets))
		for _, b := range buckets {
			out = append(out, SitePoint{T: b.From, SiteMetrics: byLabel[rawLabel(b.From.In(r.loc()), g)]})
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
	out := make([]SitePoint, 0, len(buckets))
	for _, b := range buckets {
		m, err := a.siteMetrics(site, dim, match, b)
		if err != nil {
			return nil, err
		}
		out = append(out, SitePoint{T: b.From, SiteMetrics: m})
	}
	return out, nil
}

// SiteBreakdownRow is one value of a site breakdown.
type SiteBreakdownRow struct {
	Value string `json:"value"` // "" is none (direct, unknown)
	SiteMetrics
	// Share is this value's part of the dimension's primary count:
	// pageviews for page, events for event, visits otherwise (0-1).
	Share float64 `json:"share"`
}

// SiteBreakdown answers GET /v1/sites/{id}/stats/breakdown.
type SiteBreakdown struct {
	Dimension string             `json:"dimension"`
	Total     int64              `json:"total"`
	Results   []SiteBreakdownRow `json:"results"`
	Other     int64              `json:"other"` // primary count past the limit
	Estimated []string           `json:"estimated"`
	// FromRawEvents is set when the filters could not be answered from
	// the rollups: the numbers are exact, from the raw events.
	FromRawEvents bool `json:"from_raw_events,omitempty"`
	// DroppedEvents: events of the site the edges dropped unwritten in
	// the hours of the range (see SiteAggregateAnswer).
	DroppedEvents int64 `json:"dropped_events"`
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
func (a *Aggregator) SiteBreakdown(site, dimension string, r Range, limit int, filters []DimFilter) (*SiteBreakdown, error) {
	dim, ok := siteDims[dimension]
	if !ok {
		return nil, fmt.Errorf("%w: dimension %q", ErrUnsupportedQuery, dimension)
	}
	if err := checkRange(r); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 10
	}
	if needsRaw(dimension, filters) {
		return a.rawBreakdown(site, dimension, dim, r, limit, filters)
	}
	fdim, match, err := filterOn(filters)
	if err != nil {
		return nil, err
	}
	if match != nil && fdim != dim {
		return nil, fmt.Errorf("%w: a breakdown by %s filtered on another dimension", ErrUnsupportedQuery, dimension)
	}
	if err := a.enter(); err != nil {
		return nil, err
	}
	defer a.leave()
	rows, err := a.rows(kindSite, site, dim, r, true, match)
	if err != nil {
		return nil, err
	}
	out := &SiteBreakdown{Dimension: dimension, Results: []SiteBreakdownRow{}, Estimated: []string{"visitors"}}
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
		row := SiteBreakdownRow{Value: x.value, SiteMetrics: metricsOf(dim, x.c, x.c, estimateOf(sks[x.value]))}
		row.Share = round4(ratio(primary(dim, x.c), out.Total))
		out.Results = append(out.Results, row)
	}
	return out, nil
}

// rawBreakdown answers a breakdown filtered on other dimensions from the
// raw events.
func (a *Aggregator) rawBreakdown(site, dimension string, dim byte, r Range, limit int, filters []DimFilter) (*SiteBreakdown, error) {
	if err := a.enter(); err != nil {
		return nil, err
	}
	defer a.leave()
	rows, err := a.rawSite(site, r, "", dimension, filters)
	if err != nil {
		return nil, err
	}
	out := &SiteBreakdown{Dimension: dimension, Results: []SiteBreakdownRow{}, Estimated: []string{}, FromRawEvents: true}
	primaryOf := func(m *SiteMetrics) int64 {
		switch dim {
		case dimPage:
			return m.Pageviews
		case dimEventName:
			return m.Events
		}
		return m.Visits
	}
	for i := range rows {
		out.Total += primaryOf(&rows[i].m)
	}
	sortByCount(rows, func(x *rawRow) int64 { return primaryOf(&x.m) }, func(x *rawRow) string { return x.key })
	if len(rows) > limit {
		for i := range rows[limit:] {
			out.Other += primaryOf(&rows[limit+i].m)
		}
		rows = rows[:limit]
	}
	for _, x := range rows {
		row := SiteBreakdownRow{Value: x.key, SiteMetrics: x.m}
		row.Share = round4(ratio(primaryOf(&x.m), out.Total))
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

// SiteRealtime answers GET /v1/sites/{id}/stats/realtime, from the raw
// events of the last half hour.
type SiteRealtime struct {
	// CurrentVisitors is exact: distinct visitors with a non-bot event in
	// the last 5 minutes.
	CurrentVisitors   int           `json:"current_visitors"`
	Pageviews5Minutes int64         `json:"pageviews_last_5_minutes"`
	Pageviews30Min    int64         `json:"pageviews_last_30_minutes"`
	TopPages          []RealtimeRow `json:"top_pages"` // by pageviews in the last 5 minutes
}

// RealtimeRow is a value with a count.
type RealtimeRow struct {
	Value     string `json:"value"`
	Pageviews int64  `json:"pageviews"`
}

// SiteRealtime counts the site's current visitors and recent pageviews.
func (a *Aggregator) SiteRealtime(site string) (*SiteRealtime, error) {
	if err := a.enter(); err != nil {
		return nil, err
	}
	defer a.leave()
	now := a.cfg.Now()
	nowMS := now.UnixMilli()
	out := &SiteRealtime{TopPages: []RealtimeRow{}}
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
		out.TopPages = append(out.TopPages, RealtimeRow{p, n})
	}
	sortByCount(out.TopPages, func(x *RealtimeRow) int64 { return x.Pageviews }, func(x *RealtimeRow) string { return x.Value })
	if len(out.TopPages) > 10 {
		out.TopPages = out.TopPages[:10]
	}
	return out, nil
}
