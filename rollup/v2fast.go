package rollup

import (
	"math"
	"time"

	"github.com/waymark/waymark/rollup/plausible"
	"github.com/waymark/waymark/rollup/query"
)

// The v2 fast path: queries the rollups hold exactly are answered from
// them, everything else from the raw events (plausible.Evaluate). Exactly
// held: no filters, and at most one dimension among the visit dimensions
// the rollups keep, event:page and the day, week and month time
// dimensions; metrics that those rows give by Plausible's definitions
// (rollup/DESIGN.md, "The numbers Plausible users expect"). Hours are
// left to the raw engine (Plausible smears visits over the hours a visit
// spans), and so is a range older than the hour tier (the rollups would
// answer it at whole UTC days).

// v2VisitDims maps Plausible's visit dimensions to the rollups'.
var v2VisitDims = map[string]byte{
	"visit:source": dimSource, "visit:referrer": dimReferrer, "visit:channel": dimChannel,
	"visit:utm_source": dimUTMSource, "visit:utm_medium": dimUTMMedium, "visit:utm_campaign": dimUTMCampaign,
	"visit:utm_term": dimUTMTerm, "visit:utm_content": dimUTMContent,
	"visit:country": dimCountry, "visit:device": dimDevice, "visit:browser": dimBrowser, "visit:os": dimOS,
	"visit:region": dimRegion, "visit:city": dimCity,
	"visit:browser_version": dimBrowserVersion, "visit:os_version": dimOSVersion,
	"visit:entry_page": dimEntryPage, "visit:exit_page": dimExitPage,
}

// v2FastMetrics are the metrics the fast path computes, per dimension
// kind: "" (none or time), "visit" and "page".
var v2FastMetrics = map[string]map[string]bool{
	"":      {"visitors": true, "visits": true, "pageviews": true, "events": true, "bounce_rate": true, "visit_duration": true, "views_per_visit": true},
	"visit": {"visitors": true, "visits": true, "pageviews": true, "events": true, "bounce_rate": true, "visit_duration": true},
	"page":  {"visitors": true, "visits": true, "pageviews": true, "bounce_rate": true, "visit_duration": true, "time_on_page": true, "scroll_depth": true},
}

// v2Fast answers q from the rollups when they hold it exactly; ok is false
// when the raw engine must answer.
func (a *Aggregator) v2Fast(q *plausible.Query, site string) (*plausible.Result, bool, error) {
	if len(q.Filters) > 0 || len(q.Dimensions) > 1 {
		return nil, false, nil
	}
	now := a.cfg.Now()
	if hcut, _ := a.tierCutoffs(now); hourOf(q.From.UnixMilli()) < hcut {
		return nil, false, nil
	}
	kind, dim, timeDim := "", "", ""
	if len(q.Dimensions) == 1 {
		switch d := q.Dimensions[0]; {
		case d == "time:day" || d == "time:week" || d == "time:month":
			timeDim = d
		case d == "event:page":
			kind = "page"
			dim = d
		case v2VisitDims[d] != 0:
			kind = "visit"
			dim = d
		default:
			return nil, false, nil
		}
	}
	for _, m := range q.Metrics {
		if !v2FastMetrics[kind][m] {
			return nil, false, nil
		}
	}
	r := query.Range{From: q.From, To: q.To, Loc: q.Timezone}
	if timeDim != "" && !seriesHeld(q) {
		return nil, false, nil
	}
	if timeDim != "" {
		rows, err := a.v2Series(q, site, r, timeDim)
		return a.v2Result(q, rows), err == nil, err
	}
	rows, err := a.v2Breakdown(q, site, r, kind, dim)
	return a.v2Result(q, rows), err == nil, err
}

// seriesHeld reports whether a time series' metrics are all from one of
// Plausible's tables in a way the rows hold per bucket: event metrics
// (pageviews, events, visitors of the bucket's events), or session metrics
// (visits bucketed by their last event, bounce rate, duration, views per
// visit) without visitors. Visits next to event metrics are counted by
// Plausible from the events (a visit in every bucket it has an event in),
// and visitors next to session metrics from the sessions: the raw engine
// answers those.
func seriesHeld(q *plausible.Query) bool {
	event, session := false, false
	for _, m := range q.Metrics {
		switch m {
		case "pageviews", "events", "visitors":
			event = true
		case "visits", "bounce_rate", "visit_duration", "views_per_visit":
			session = true
		}
	}
	return !(event && session)
}

// v2Cell is what one result row is computed from.
type v2Cell struct {
	label    string
	c        counters
	entry    counters // for a page: its entry-page row (bounce rate, duration)
	visitors uint64
}

// metric is one metric of a cell by Plausible's definitions and types.
// sessions says the query is answered from Plausible's sessions table (it
// has no event metric), where visits are sessions bucketed by their last
// event rather than visits with an event in the range.
func (c *v2Cell) metric(name string, page, sessions bool) plausible.Value {
	visits := c.c[fVisits]
	switch {
	case page:
		visits = c.c[fEventVisits]
	case sessions:
		visits = c.c[fSessions]
	}
	sess := &c.c
	if page {
		sess = &c.entry
	}
	div := func(n, d int64) float64 {
		if d == 0 {
			return 0
		}
		return float64(n) / float64(d)
	}
	switch name {
	case "visitors":
		return plausible.IntValue(int64(c.visitors))
	case "visits":
		return plausible.IntValue(visits)
	case "pageviews":
		return plausible.IntValue(c.c[fCount])
	case "events":
		return plausible.IntValue(c.c[fCount] + c.c[fEvents])
	case "bounce_rate":
		return plausible.IntValue(int64(math.RoundToEven(div(sess[fBounces], sess[fSessions]) * 100)))
	case "visit_duration":
		return plausible.IntValue(int64(math.RoundToEven(div(sess[fDurationMS], sess[fSessions]) / 1000)))
	case "views_per_visit":
		return plausible.FloatValue(math.RoundToEven(div(c.c[fVisitPV], c.c[fSessions])*100) / 100)
	case "time_on_page", "scroll_depth":
		if c.c[fEngVisits] == 0 {
			return plausible.NullValue()
		}
		if name == "time_on_page" {
			return plausible.IntValue(int64(math.RoundToEven(float64(c.c[fEngagedMS]) / 1000 / float64(c.c[fEngVisits]))))
		}
		return plausible.IntValue(int64(math.RoundToEven(float64(c.c[fScrollSum]) / float64(c.c[fEngVisits]))))
	}
	return plausible.NullValue()
}

// v2Breakdown computes the cells of an aggregate (kind "") or of a
// breakdown by one visit dimension or by page.
func (a *Aggregator) v2Breakdown(q *plausible.Query, site string, r query.Range, kind, dimName string) ([]v2Cell, error) {
	dim := byte(dimTotal)
	switch kind {
	case "page":
		dim = dimPage
	case "visit":
		dim = v2VisitDims[dimName]
	}
	rows, err := a.rows(kindSite, site, dim, r, true, nil)
	if err != nil {
		return nil, err
	}
	var entries map[string]*counters
	if kind == "page" {
		if entries, err = a.rows(kindSite, site, dimEntryPage, r, true, nil); err != nil {
			return nil, err
		}
	}
	values := make([]string, 0, len(rows))
	for v, c := range rows {
		if kind == "" || !c.isZero() {
			values = append(values, v)
		}
	}
	if kind == "" && len(values) == 0 {
		values = append(values, "") // an aggregate is one row, even empty
	}
	var sets map[string]*visitorAcc
	if q.HasMetric("visitors") {
		if sets, err = a.setsOf(kindSite, site, dim, r, values); err != nil {
			return nil, err
		}
	}
	cells := make([]v2Cell, 0, len(values))
	for _, v := range values {
		cell := v2Cell{label: query.PlausibleLabel(dimName, v)}
		if c := rows[v]; c != nil {
			cell.c = *c
		}
		if e := entries[v]; e != nil {
			cell.entry = *e
		}
		cell.visitors = sets[v].estimate()
		if kind != "" && cell.c[fCount] == 0 && cell.c[fVisits] == 0 && cell.c[fEvents] == 0 && cell.c[fSessions] == 0 {
			continue // Plausible has no row for a value without events
		}
		cells = append(cells, cell)
	}
	return cells, nil
}

// v2Series computes the cells of a time series by day, week or month,
// bucketed in the site's zone; only buckets with events are rows.
func (a *Aggregator) v2Series(q *plausible.Query, site string, r query.Range, timeDim string) ([]v2Cell, error) {
	g := map[string]query.Granularity{"time:day": query.Day, "time:week": query.Week, "time:month": query.Month}[timeDim]
	buckets, err := r.Buckets(g)
	if err != nil {
		return nil, err
	}
	var cells []v2Cell
	for _, b := range buckets {
		label := b.From
		b.From, b.To = maxTime(b.From, r.From), minTime(b.To, r.To)
		if !b.To.After(b.From) {
			continue
		}
		if g == query.Week {
			label = b.From // Plausible clamps the first week to the range
		}
		rows, err := a.rows(kindSite, site, dimTotal, b, false, nil)
		if err != nil {
			return nil, err
		}
		c := rows[""]
		if c == nil || (c[fCount] == 0 && c[fEvents] == 0 && c[fVisits] == 0 && c[fSessions] == 0) {
			continue
		}
		cell := v2Cell{label: label.In(r.Location()).Format(time.DateOnly), c: *c}
		if q.HasMetric("visitors") {
			sets, err := a.setsOf(kindSite, site, dimTotal, b, []string{""})
			if err != nil {
				return nil, err
			}
			cell.visitors = sets[""].estimate()
		}
		cells = append(cells, cell)
	}
	if !q.HasMetric("pageviews") && !q.HasMetric("events") && !q.HasMetric("visitors") {
		tail, err := a.v2SeriesTail(site, r, g)
		if err != nil || tail == nil {
			return cells, err
		}
		cells = append(cells, *tail)
	}
	return cells, nil
}

// v2SeriesTail is the row Plausible's sessions table adds after the range:
// a session that overlaps the range but had its last event after it is
// bucketed by that event, outside the range (the crossing row at the
// range's end holds those sessions). It is labelled with the bucket just
// after the range, which holds every such session shorter than a day.
func (a *Aggregator) v2SeriesTail(site string, r query.Range, g query.Granularity) (*v2Cell, error) {
	after := query.Range{From: r.To, To: r.To.Add(time.Hour), Loc: r.Loc}
	bs, err := after.Buckets(g)
	if err != nil || len(bs) == 0 {
		return nil, err
	}
	_, h1 := hoursOf(r)
	c, _, err := a.sumRows(kindSite, site, dimCode(dimTotal), h1, h1, true, nil)
	if err != nil {
		return nil, err
	}
	total := c[""]
	if total == nil || total[fSessions] <= 0 {
		return nil, nil
	}
	return &v2Cell{label: bs[0].From.In(r.Location()).Format(time.DateOnly), c: *total}, nil
}

// v2Result computes the cells' metrics, and orders and pages them as q
// asks (query.V2Result).
func (a *Aggregator) v2Result(q *plausible.Query, cells []v2Cell) *plausible.Result {
	page := len(q.Dimensions) == 1 && q.Dimensions[0] == "event:page"
	sessions := !page
	for _, m := range q.Metrics {
		switch m {
		case "pageviews", "events", "time_on_page", "scroll_depth":
			sessions = false
		}
	}
	rows := make([]plausible.Row, len(cells))
	for i := range cells {
		c := &cells[i]
		row := plausible.Row{Metrics: make([]plausible.Value, len(q.Metrics))}
		if len(q.Dimensions) == 1 {
			row.Dimensions = []plausible.Value{query.PlausibleDimValue(q.Dimensions[0], c.label)}
		}
		for j, m := range q.Metrics {
			row.Metrics[j] = c.metric(m, page, sessions)
		}
		rows[i] = row
	}
	return query.V2Result(q, rows)
}
