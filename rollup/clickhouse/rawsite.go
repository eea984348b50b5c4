package clickhouse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/plausible"
	"github.com/waymark/waymark/rollup/query"
	"github.com/waymark/waymark/rollup/sources"
)

// Plausible's Stats API v2, and the native site questions the rows cannot
// answer (filters on several dimensions), go to rollup/plausible's engine
// over the raw events read from ClickHouse: one definition of every
// metric, the same as the embedded store's raw path. Each event carries its
// visit's id (sessions.go), so a visit past midnight UTC keeps one visitor.

func roundEven(v float64) float64 { return math.RoundToEven(v) }

// QueryV2 answers a parsed v2 query on site from the raw events, exactly
// (nothing estimated).
func (b *Backend) QueryV2(site string, q *plausible.Query) (*plausible.Result, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	ctx, cancel := b.ctx()
	defer cancel()
	res, err := plausible.Evaluate(q, rawSource{b, ctx}, b.v2Config())
	if err != nil {
		return nil, err
	}
	res.Estimated = []string{}
	return res, nil
}

// v2Config is the engine's configuration: Waymark's referrer names and
// channels (rollup/sources), as the embedded store's.
func (b *Backend) v2Config() plausible.Config {
	return plausible.Config{
		MaxEvents: b.cfg.MaxEvents,
		Source:    sources.Source,
		Channel: func(src, _, utmSource, utmMedium, utmCampaign string) string {
			return sources.Channel(src, sources.UTM{Source: utmSource, Medium: utmMedium, Campaign: utmCampaign}, "")
		},
	}
}

// rawSource feeds the engine a site's non-bot events.
type rawSource struct {
	b   *Backend
	ctx context.Context
}

// ScanSite delivers the site's non-bot events of [from, to), each under
// its visit's id: read from the UTC midnight before (less the gap), so
// that a visit going on past it is found.
func (s rawSource) ScanSite(site string, from, to int64, fn func(*plausible.Event) error) error {
	dayStart := floorDiv(from, 24*msPerHour) * 24 * msPerHour
	evs, err := s.b.c.loadSiteEvents(s.ctx, site, min(from-msPerHour, dayStart-visitGapMS), to, s.b.cfg.MaxEvents, allCols)
	if errors.Is(err, errTooManyEvents) {
		return &plausible.ScanLimitError{Limit: s.b.cfg.MaxEvents}
	}
	if err != nil {
		return err
	}
	d := sessionize(evs)
	var pe plausible.Event
	i, j := d.span(from, to)
	for k := i; k < j; k++ {
		ev := &d.evs[k]
		toPlausible(ev, &pe)
		if vi := d.of[k]; vi >= 0 {
			pe.Hash = d.visits[vi].id
		}
		if err := fn(&pe); err != nil {
			return err
		}
	}
	return nil
}

// toPlausible converts a stored event for the engine.
func toPlausible(ev *storedEvent, pe *plausible.Event) {
	props := pe.Props[:0]
	*pe = plausible.Event{
		Time: ev.Time, Name: ev.Name, Path: ev.Path, Hash: ev.VisitorHash,
		ReferrerHost: ev.ReferrerHost, UTMSource: ev.UTMSource, UTMMedium: ev.UTMMedium,
		UTMCampaign: ev.UTMCampaign, UTMTerm: ev.UTMTerm, UTMContent: ev.UTMContent,
		Country: ev.Country, Region: ev.Subdivision, City: ev.City,
		Device: ev.Device, Browser: ev.Browser, BrowserVersion: ev.BrowserVersion,
		OS: ev.OS, OSVersion: ev.OSVersion,
		EngagedMS: uint32(min(ev.EngagedMS, 1<<32-1)), ScrollDepth: ev.ScrollDepth,
		Interactive: ev.Flags&ingest.FlagNonInteractive == 0,
	}
	switch ev.Kind {
	case ingest.KindPageview:
		pe.Kind = plausible.Pageview
	case ingest.KindEngagement:
		pe.Kind = plausible.Engagement
	default:
		pe.Kind = plausible.Custom
	}
	for _, p := range ev.Props {
		props = append(props, plausible.Prop{Key: p.Key, Value: p.Value})
	}
	pe.Props = props
}

// engineRow is one row of a raw answer: a bucket label or a breakdown value.
type engineRow struct {
	key string
	m   query.SiteMetrics
}

// rawSite answers a native site question from the raw events: the v1
// request is written as a v2 query and evaluated by the engine, as the
// embedded store's raw path does.
func (b *Backend) rawSite(ctx context.Context, site string, r query.Range, g query.Granularity, dimension string, filters []query.DimFilter) ([]engineRow, error) {
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
		d, ok := query.V2Dimensions[dimension]
		if !ok {
			return nil, fmt.Errorf("%w: dimension %q", query.ErrUnsupportedQuery, dimension)
		}
		dims = append(dims, d)
	}
	var fs [][]any
	for _, f := range filters {
		d, ok := query.V2Dimensions[f.Dimension]
		if !ok {
			return nil, fmt.Errorf("%w: filter dimension %q", query.ErrUnsupportedQuery, f.Dimension)
		}
		pageScoped = pageScoped || f.Dimension == "page"
		vals := make([]any, len(f.Values))
		for i, v := range f.Values {
			if d == "visit:city" { // Plausible's city values are GeoNames ids, integers
				id, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("%w: a city filter value is a GeoNames id, not %q", query.ErrUnsupportedQuery, v)
				}
				vals[i] = id
				continue
			}
			vals[i] = query.PlausibleValue(d, v)
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
	q, err := plausible.Parse(raw, plausible.Site{ID: site, Domain: site, Timezone: loc.String()}, b.cfg.Now())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", query.ErrUnsupportedQuery, err)
	}
	res, err := plausible.Evaluate(q, rawSource{b, ctx}, b.v2Config())
	var qe *plausible.QueryError
	var se *plausible.ScanLimitError
	if errors.As(err, &qe) || errors.As(err, &se) {
		return nil, fmt.Errorf("%w: %v", query.ErrUnsupportedQuery, err)
	}
	if err != nil {
		return nil, err
	}
	out := make([]engineRow, 0, len(res.Rows))
	for _, row := range res.Rows {
		rr := engineRow{}
		if len(row.Dimensions) > 0 {
			last := row.Dimensions[len(row.Dimensions)-1]
			rr.key = query.StoredValue(dims[len(dims)-1], last.Str)
			if last.Kind == plausible.Int { // visit:city; 0 is unknown
				rr.key = ""
				if last.Int != 0 {
					rr.key = strconv.FormatInt(last.Int, 10)
				}
			}
			if g != "" {
				rr.key = row.Dimensions[0].Str
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
				rr.m.Visitors = uint64(n)
			case "visits":
				rr.m.Visits = n
			case "pageviews":
				rr.m.Pageviews = n
			case "bounce_rate":
				rr.m.BounceRate = f
			case "visit_duration":
				rr.m.VisitDuration = f
			case "events":
				rr.m.Events = n
			case "views_per_visit":
				rr.m.ViewsPerVisit = f
			case "time_on_page":
				rr.m.TimeOnPage = f
			case "scroll_depth":
				rr.m.ScrollDepth = f
			}
		}
		out = append(out, rr)
	}
	return out, nil
}
