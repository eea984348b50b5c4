package rollup

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// maxV2Body bounds a /api/v2/query body.
const maxV2Body = 64 << 10

// v2Query is a Plausible Stats API v2 request, decoded and checked.
type v2Query struct {
	SiteID     string          `json:"site_id"`
	Metrics    []string        `json:"metrics"`
	DateRange  json.RawMessage `json:"date_range"`
	Dimensions []string        `json:"dimensions"`
	Filters    [][]any         `json:"filters"`
	OrderBy    [][]string      `json:"order_by"`
	Include    map[string]any  `json:"include,omitempty"`
	Pagination *struct {
		Limit  int `json:"limit"`
		Offset int `json:"offset"`
	} `json:"pagination,omitempty"`

	// Decoded from the above.
	dateRange []string // one shortcut, or two dates
	filters   []DimFilter
}

// v2Metrics are the metrics served, each a field of SiteMetrics.
var v2Metrics = map[string]func(*SiteMetrics) any{
	"visitors":        func(m *SiteMetrics) any { return m.Visitors },
	"visits":          func(m *SiteMetrics) any { return m.Visits },
	"pageviews":       func(m *SiteMetrics) any { return m.Pageviews },
	"views_per_visit": func(m *SiteMetrics) any { return m.ViewsPerVisit },
	"bounce_rate":     func(m *SiteMetrics) any { return m.BounceRate },
	"visit_duration":  func(m *SiteMetrics) any { return m.VisitDuration },
	"events":          func(m *SiteMetrics) any { return m.Events },
	"time_on_page":    func(m *SiteMetrics) any { return m.TimeOnPage },
	"scroll_depth":    func(m *SiteMetrics) any { return m.ScrollDepth },
}

// v2Dims maps Plausible's dimension names to ours.
var v2Dims = map[string]string{
	"event:page": "page", "event:name": "event", "visit:entry_page": "entry_page",
	"visit:exit_page": "exit_page", "visit:source": "source", "visit:referrer": "referrer",
	"visit:country": "country", "visit:device": "device", "visit:browser": "browser", "visit:os": "os",
	"visit:utm_source": "utm_source", "visit:utm_medium": "utm_medium", "visit:utm_campaign": "utm_campaign",
	"visit:utm_term": "utm_term", "visit:utm_content": "utm_content",
}

var v2TimeDims = map[string]Granularity{"time:hour": Hour, "time:day": Day, "time:week": Week, "time:month": Month}

// decodeV2Query decodes and checks a v2 query body.
func decodeV2Query(body []byte) (*v2Query, error) {
	if len(body) > maxV2Body {
		return nil, errors.New("query body too large")
	}
	var q v2Query
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&q); err != nil {
		return nil, fmt.Errorf("cannot decode query: %w", err)
	}
	if q.SiteID == "" {
		return nil, errors.New("site_id is required")
	}
	if len(q.Metrics) == 0 {
		return nil, errors.New("metrics is required")
	}
	for _, m := range q.Metrics {
		if v2Metrics[m] == nil {
			return nil, fmt.Errorf("unsupported metric %q", m)
		}
	}
	var shortcut string
	var dates []string
	switch {
	case len(q.DateRange) == 0:
		return nil, errors.New("date_range is required")
	case json.Unmarshal(q.DateRange, &shortcut) == nil:
		switch shortcut {
		case "day", "7d", "30d", "month", "year":
			q.dateRange = []string{shortcut}
		default:
			return nil, fmt.Errorf("unsupported date_range %q", shortcut)
		}
	case json.Unmarshal(q.DateRange, &dates) == nil && len(dates) == 2:
		q.dateRange = dates
	default:
		return nil, errors.New("date_range must be a shortcut or two dates")
	}
	timeDims, otherDims := 0, 0
	for _, d := range q.Dimensions {
		switch {
		case v2TimeDims[d] != "":
			timeDims++
		case v2Dims[d] != "":
			otherDims++
		default:
			return nil, fmt.Errorf("unsupported dimension %q", d)
		}
	}
	if timeDims > 1 || otherDims > 1 || timeDims+otherDims > 1 {
		return nil, errors.New("at most one dimension is supported")
	}
	for _, f := range q.Filters {
		if len(f) != 3 {
			return nil, errors.New("a filter is [operator, dimension, [values]]")
		}
		op, ok1 := f[0].(string)
		dim, ok2 := f[1].(string)
		vals, ok3 := f[2].([]any)
		if !ok1 || !ok2 || !ok3 || len(vals) == 0 {
			return nil, errors.New("a filter is [operator, dimension, [values]]")
		}
		if op != "is" && op != "is_not" && op != "contains" {
			return nil, fmt.Errorf("unsupported filter operator %q", op)
		}
		our := v2Dims[dim]
		if our == "" {
			return nil, fmt.Errorf("unsupported filter dimension %q", dim)
		}
		df := DimFilter{Dimension: our, Op: op}
		for _, v := range vals {
			s, ok := v.(string)
			if !ok {
				return nil, errors.New("filter values must be strings")
			}
			df.Values = append(df.Values, s)
		}
		q.filters = append(q.filters, df)
	}
	if q.Pagination != nil && (q.Pagination.Limit < 0 || q.Pagination.Offset < 0) {
		return nil, errors.New("pagination must not be negative")
	}
	return &q, nil
}

// v2Range turns the date range into instants in loc.
func v2Range(dr []string, now time.Time, loc *time.Location) (Range, error) {
	today := now.In(loc)
	midnight := time.Date(today.Year(), today.Month(), today.Day(), 0, 0, 0, 0, loc)
	r := Range{Loc: loc}
	if len(dr) == 2 {
		from, err := parseTime(dr[0], loc, false)
		if err != nil {
			return r, err
		}
		to, err := parseTime(dr[1], loc, true)
		if err != nil {
			return r, err
		}
		r.From, r.To = from, to
		if !r.To.After(r.From) {
			return r, errors.New("date_range ends before it starts")
		}
		return r, nil
	}
	r.To = midnight.AddDate(0, 0, 1)
	switch dr[0] {
	case "day":
		r.From = midnight
	case "7d":
		r.From = midnight.AddDate(0, 0, -6)
	case "30d":
		r.From = midnight.AddDate(0, 0, -29)
	case "month":
		r.From = time.Date(today.Year(), today.Month(), 1, 0, 0, 0, 0, loc)
	case "year":
		r.From = time.Date(today.Year(), 1, 1, 0, 0, 0, 0, loc)
	}
	return r, nil
}

type v2Result struct {
	Metrics    []any    `json:"metrics"`
	Dimensions []string `json:"dimensions"`
}

func (a *Aggregator) serveV2(ctx *fasthttp.RequestCtx, auth Authorizer, owner string) {
	q, err := decodeV2Query(ctx.PostBody())
	if err != nil {
		problem(ctx, fasthttp.StatusBadRequest, "invalid-request", err.Error())
		return
	}
	site, ok := auth.SiteByDomain(q.SiteID)
	if !ok || site.Owner != owner {
		problem(ctx, fasthttp.StatusNotFound, "not-found", "no such site")
		return
	}
	loc, err := time.LoadLocation(site.Timezone)
	if err != nil {
		loc = time.UTC
	}
	r, err := v2Range(q.dateRange, a.cfg.Now(), loc)
	if err != nil {
		problem(ctx, fasthttp.StatusBadRequest, "invalid-request", err.Error())
		return
	}
	row := func(m *SiteMetrics, dims []string) v2Result {
		out := v2Result{Dimensions: dims, Metrics: make([]any, len(q.Metrics))}
		for i, name := range q.Metrics {
			out.Metrics[i] = v2Metrics[name](m)
		}
		return out
	}
	results := []v2Result{}
	var dim string
	if len(q.Dimensions) == 1 {
		dim = q.Dimensions[0]
	}
	switch {
	case dim == "":
		m, err := a.SiteAggregate(site.ID, r, q.filters)
		if err != nil {
			a.queryError(ctx, err)
			return
		}
		results = append(results, row(&m, []string{}))
	case v2TimeDims[dim] != "":
		g := v2TimeDims[dim]
		pts, err := a.SiteTimeseries(site.ID, r, g, q.filters)
		if err != nil {
			a.queryError(ctx, err)
			return
		}
		for i := range pts {
			if pts[i].Visits == 0 && pts[i].Pageviews == 0 && pts[i].Events == 0 {
				continue // Plausible leaves empty buckets out
			}
			label := pts[i].T.In(loc).Format(time.DateOnly)
			if g == Hour {
				label = pts[i].T.In(loc).Format(time.DateTime)
			}
			results = append(results, row(&pts[i].SiteMetrics, []string{label}))
		}
	default:
		limit := 10000
		bd, err := a.SiteBreakdown(site.ID, v2Dims[dim], r, limit, q.filters)
		if err != nil {
			a.queryError(ctx, err)
			return
		}
		for i := range bd.Results {
			v := bd.Results[i].Value
			if v == "" && (dim == "visit:source" || dim == "visit:referrer") {
				v = "Direct / None"
			}
			results = append(results, row(&bd.Results[i].SiteMetrics, []string{v}))
		}
	}
	sortV2(results, q)
	if p := q.Pagination; p != nil {
		if p.Offset >= len(results) {
			results = results[:0]
		} else {
			results = results[p.Offset:]
		}
		if p.Limit > 0 && p.Limit < len(results) {
			results = results[:p.Limit]
		}
	}
	bdim := ""
	if v2TimeDims[dim] == "" {
		bdim = v2Dims[dim]
	}
	raw := needsRaw(bdim, q.filters)
	var estimated []string
	for _, m := range q.Metrics {
		if m == "visitors" && !raw {
			estimated = append(estimated, m)
		}
	}
	meta := map[string]any{"estimated_metrics": nonNilStrings(estimated), "time_zone": loc.String()}
	if raw {
		// Filters on several dimensions: counted exactly from raw events.
		meta["source"] = "raw_events"
	}
	query := map[string]any{
		"site_id":    q.SiteID,
		"metrics":    q.Metrics,
		"date_range": []string{r.From.In(loc).Format(time.RFC3339), r.To.Add(-time.Second).In(loc).Format(time.RFC3339)},
		"filters":    nonNil(q.Filters),
		"dimensions": nonNilStrings(q.Dimensions),
		"order_by":   q.OrderBy,
	}
	writeJSON(ctx, map[string]any{
		"results": results,
		"meta":    meta,
		"query":   query,
	})
}

// sortV2 applies order_by on metrics or the dimension; time series are
// already in time order.
func sortV2(results []v2Result, q *v2Query) {
	for i := len(q.OrderBy) - 1; i >= 0; i-- {
		o := q.OrderBy[i]
		if len(o) != 2 {
			continue
		}
		desc := o[1] == "desc"
		mi := slices.Index(q.Metrics, o[0])
		slices.SortStableFunc(results, func(x, y v2Result) int {
			var c int
			if mi >= 0 {
				c = compareAny(x.Metrics[mi], y.Metrics[mi])
			} else if len(x.Dimensions) > 0 && len(y.Dimensions) > 0 {
				c = strings.Compare(x.Dimensions[0], y.Dimensions[0])
			}
			if desc {
				return -c
			}
			return c
		})
	}
}

func compareAny(x, y any) int {
	f := func(v any) float64 {
		switch n := v.(type) {
		case uint64:
			return float64(n)
		case int64:
			return float64(n)
		case float64:
			return n
		}
		return 0
	}
	fx, fy := f(x), f(y)
	switch {
	case fx < fy:
		return -1
	case fx > fy:
		return 1
	}
	return 0
}

func nonNil(v [][]any) [][]any {
	if v == nil {
		return [][]any{}
	}
	return v
}

func nonNilStrings(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}
