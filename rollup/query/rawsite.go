package query

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/waymark/waymark/rollup/plausible"
)

// RawRow is one row of a raw answer (RawSite): a time bucket's start (as
// Plausible labels it) or a breakdown value, and its metrics.
type RawRow struct {
	Key string
	M   SiteMetrics
}

// RawSite answers a native site question from raw events, through the
// same engine as /api/v2/query: over r, by g ("" for no series) or by
// dimension ("" for none), narrowed by filters. The v1 request is written
// as a v2 query, evaluated over src and the rows mapped back, so every
// backend has one definition of every metric, wherever it is asked.
func RawSite(site string, r Range, g Granularity, dimension string, filters []DimFilter, now time.Time, src plausible.EventSource, cfg plausible.Config) ([]RawRow, error) {
	loc := r.Location()
	body := map[string]any{
		"site_id":    site,
		"date_range": []string{r.From.In(loc).Format(time.RFC3339), r.To.Add(-time.Second).In(loc).Format(time.RFC3339)},
		"pagination": map[string]int{"limit": 10000},
	}
	var dims []string
	if g != "" {
		dims = append(dims, "time:"+string(g))
	}
	pageScoped := dimension == "page"
	if dimension != "" {
		d, ok := V2Dimensions[dimension]
		if !ok {
			return nil, fmt.Errorf("%w: dimension %q", ErrUnsupportedQuery, dimension)
		}
		dims = append(dims, d)
	}
	var fs [][]any
	for _, f := range filters {
		d, ok := V2Dimensions[f.Dimension]
		if !ok {
			return nil, fmt.Errorf("%w: filter dimension %q", ErrUnsupportedQuery, f.Dimension)
		}
		pageScoped = pageScoped || f.Dimension == "page"
		vals := make([]any, len(f.Values))
		for i, v := range f.Values {
			if d == "visit:city" { // Plausible's city values are GeoNames ids, integers
				id, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("%w: a city filter value is a GeoNames id, not %q", ErrUnsupportedQuery, v)
				}
				vals[i] = id
				continue
			}
			vals[i] = PlausibleValue(d, v)
		}
		fs = append(fs, []any{f.Op, d, vals, map[string]bool{"case_sensitive": f.Op != "contains"}})
	}
	metrics := []string{"visitors", "visits", "pageviews", "bounce_rate", "visit_duration", "events"}
	if dimension == "entry_page" || dimension == "exit_page" {
		metrics = []string{"visitors", "visits", "bounce_rate", "visit_duration"}
	}
	if len(dims) == 0 && !pageScoped {
		metrics = append(metrics, "views_per_visit")
	}
	if pageScoped {
		metrics = append(metrics, "time_on_page", "scroll_depth")
	}
	body["metrics"] = metrics
	if len(dims) > 0 {
		body["dimensions"] = dims
	}
	if len(fs) > 0 {
		body["filters"] = fs
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("cannot build a raw query: %w", err)
	}
	q, err := plausible.Parse(raw, plausible.Site{ID: site, Domain: site, Timezone: loc.String()}, now)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsupportedQuery, err)
	}
	res, err := plausible.Evaluate(q, src, cfg)
	var qe *plausible.QueryError
	var se *plausible.ScanLimitError
	if errors.As(err, &qe) || errors.As(err, &se) {
		return nil, fmt.Errorf("%w: %v", ErrUnsupportedQuery, err)
	}
	if err != nil {
		return nil, err
	}
	out := make([]RawRow, 0, len(res.Rows))
	for _, row := range res.Rows {
		rr := RawRow{}
		if len(row.Dimensions) > 0 {
			last := row.Dimensions[len(row.Dimensions)-1]
			rr.Key = StoredValue(dims[len(dims)-1], last.Str)
			if last.Kind == plausible.Int { // visit:city; 0 is unknown
				rr.Key = ""
				if last.Int != 0 {
					rr.Key = strconv.FormatInt(last.Int, 10)
				}
			}
			if g != "" {
				rr.Key = row.Dimensions[0].Str
			}
		}
		for i, name := range metrics {
			v := row.Metrics[i]
			n, f := v.Int, float64(v.Int)
			if v.Kind == plausible.Float {
				f = v.Float
			}
			switch name {
			case "visitors":
				rr.M.Visitors = uint64(n)
			case "visits":
				rr.M.Visits = n
			case "pageviews":
				rr.M.Pageviews = n
			case "bounce_rate":
				rr.M.BounceRate = f
			case "visit_duration":
				rr.M.VisitDuration = f
			case "events":
				rr.M.Events = n
			case "views_per_visit":
				rr.M.ViewsPerVisit = f
			case "time_on_page":
				rr.M.TimeOnPage = f
			case "scroll_depth":
				rr.M.ScrollDepth = f
			}
		}
		out = append(out, rr)
	}
	return out, nil
}
