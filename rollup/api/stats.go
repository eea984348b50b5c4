package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/edge/problem"
	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
	"github.com/waymark/waymark/store"
)

// Authorizer is provided by the node, which owns API keys and the link
// and site tables.
type Authorizer interface {
	Owner(apiKey []byte) (ownerID string, ok bool) // 401 when !ok
	Link(code string) (store.Link, bool)
	Site(id string) (store.Site, bool)
	SiteByDomain(domain string) (store.Site, bool) // for /api/v2/query site_id
}

// StatsHandler serves the stats API from b, scoped to the owner of the API
// key (auth):
//
//	GET  /v1/links/{code}/stats[/breakdown|/realtime|/overview]
//	GET  /v1/sites/{id}/stats/aggregate|timeseries|breakdown|realtime|heatmap|goals
//	POST /api/v2/query (Plausible Stats API v2)
//
// Another owner's link or site answers 404, exactly as a missing one.
// Errors are RFC 9457 problem+json with types /problems/<name>.
func StatsHandler(b query.Backend, auth Authorizer, cfg Config) fasthttp.RequestHandler {
	a := &stats{b: b, auth: auth, cfg: cfg}
	return func(ctx *fasthttp.RequestCtx) {
		path := string(ctx.Path())
		owner, ok := bearerOwner(ctx, auth)
		if !ok {
			ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="waymark"`)
			writeProblem(ctx, "unauthorized", "a valid API key is required")
			return
		}
		if path == "/api/v2/query" {
			if !ctx.IsPost() {
				ctx.Response.Header.Set("Allow", "POST")
				writeProblem(ctx, "method-not-allowed", "use POST")
				return
			}
			a.serveV2(ctx, owner)
			return
		}
		if !ctx.IsGet() && !ctx.IsHead() {
			ctx.Response.Header.Set("Allow", "GET, HEAD")
			writeProblem(ctx, "method-not-allowed", "use GET")
			return
		}
		parts := strings.Split(strings.Trim(path, "/"), "/")
		switch {
		case len(parts) >= 4 && parts[0] == "v1" && parts[1] == "links" && parts[3] == "stats":
			l, ok := auth.Link(parts[2])
			if !ok || l.Owner != owner {
				writeProblem(ctx, "not-found", "no such link")
				return
			}
			a.serveLink(ctx, l.Code, parts[4:])
		case len(parts) == 5 && parts[0] == "v1" && parts[1] == "sites" && parts[3] == "stats":
			s, ok := auth.Site(parts[2])
			if !ok || s.Owner != owner {
				writeProblem(ctx, "not-found", "no such site")
				return
			}
			a.serveSite(ctx, s, parts[4])
		default:
			writeProblem(ctx, "not-found", "no such endpoint")
		}
	}
}

func bearerOwner(ctx *fasthttp.RequestCtx, auth Authorizer) (string, bool) {
	h := ctx.Request.Header.Peek("Authorization")
	const scheme = "bearer "
	if len(h) <= len(scheme) || !bytes.EqualFold(h[:len(scheme)], []byte(scheme)) {
		return "", false
	}
	return auth.Owner(bytes.TrimSpace(h[len(scheme):]))
}

// writeProblem answers an RFC 9457 problem with the catalogue's title and
// status, and the request path as instance, as the rest of the API does.
func writeProblem(ctx *fasthttp.RequestCtx, name, detail string) { problem.Write(ctx, name, detail) }

func writeJSON(ctx *fasthttp.RequestCtx, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeProblem(ctx, "internal", "cannot encode the answer")
		return
	}
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetBody(b)
}

// queryError answers an error from the query API.
func (a *stats) queryError(ctx *fasthttp.RequestCtx, err error) {
	switch {
	case errors.Is(err, query.ErrUnsupportedQuery):
		writeProblem(ctx, "invalid-request", err.Error())
	case errors.Is(err, query.ErrClosed):
		writeProblem(ctx, "unavailable", "the aggregator is shutting down")
	default:
		a.log().Error("cannot answer stats query", "path", string(ctx.Path()), "err", err)
		writeProblem(ctx, "internal", "cannot read stats")
	}
}

// parseRange reads from, to and tz. Dates (YYYY-MM-DD) are days in the
// zone, to inclusive; RFC 3339 instants are taken as they are. The default
// is the last 7 days up to now.
func (a *stats) parseRange(args *fasthttp.Args, defTZ string) (query.Range, error) {
	tz := string(args.Peek("tz"))
	if tz == "" {
		tz = defTZ
	}
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return query.Range{}, errors.New("unknown time zone " + strconv.Quote(tz))
	}
	r := query.Range{Loc: loc, To: a.now()}
	if v := string(args.Peek("to")); v != "" {
		if r.To, err = parseTime(v, loc, true); err != nil {
			return query.Range{}, err
		}
	}
	r.From = r.To.Add(-7 * 24 * time.Hour)
	if v := string(args.Peek("from")); v != "" {
		if r.From, err = parseTime(v, loc, false); err != nil {
			return query.Range{}, err
		}
	}
	if !r.To.After(r.From) {
		return query.Range{}, errors.New("from must be before to")
	}
	return r, nil
}

func parseTime(v string, loc *time.Location, end bool) (time.Time, error) {
	if d, err := time.ParseInLocation(time.DateOnly, v, loc); err == nil {
		if end {
			d = d.AddDate(0, 0, 1)
		}
		return d, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, errors.New("bad time " + strconv.Quote(v) + ": want YYYY-MM-DD or RFC 3339")
	}
	return t, nil
}

func granularityArg(args *fasthttp.Args) (query.Granularity, error) {
	switch g := query.Granularity(args.Peek("granularity")); g {
	case "":
		return query.Day, nil
	case query.Hour, query.Day, query.Week, query.Month:
		return g, nil
	default:
		return "", errors.New("granularity must be hour, day, week or month")
	}
}

func limitArg(args *fasthttp.Args) (int, error) {
	v := args.Peek("limit")
	if len(v) == 0 {
		return 10, nil
	}
	n, err := strconv.Atoi(string(v))
	if err != nil || n < 1 || n > 1000 {
		return 0, errors.New("limit must be 1 to 1000")
	}
	return n, nil
}

func (a *stats) serveLink(ctx *fasthttp.RequestCtx, code string, rest []string) {
	args := ctx.QueryArgs()
	if len(rest) == 1 && rest[0] == "overview" {
		a.serveLinkOverview(ctx, code) // linkoverview.go
		return
	}
	if len(rest) == 1 && rest[0] == "export" {
		a.serveLinkExport(ctx, code) // export.go
		return
	}
	if len(rest) == 1 && rest[0] == "realtime" {
		n, err := limitArg(args)
		if err != nil {
			writeProblem(ctx, "invalid-request", err.Error())
			return
		}
		if len(args.Peek("limit")) == 0 {
			n = 20
		}
		out, err := a.b.LinkRealtime(code, n)
		if err != nil {
			a.queryError(ctx, err)
			return
		}
		writeJSON(ctx, out)
		return
	}
	r, err := a.parseRange(args, "UTC")
	if err != nil {
		writeProblem(ctx, "invalid-request", err.Error())
		return
	}
	switch {
	case len(rest) == 0:
		g, err := granularityArg(args)
		if err != nil {
			writeProblem(ctx, "invalid-request", err.Error())
			return
		}
		out, err := a.b.LinkStats(code, r, g)
		if err != nil {
			a.queryError(ctx, err)
			return
		}
		writeJSON(ctx, out)
	case len(rest) == 1 && rest[0] == "breakdown":
		limit, err := limitArg(args)
		if err != nil {
			writeProblem(ctx, "invalid-request", err.Error())
			return
		}
		out, err := a.b.LinkBreakdown(code, string(args.Peek("dimension")), r, limit)
		if err != nil {
			a.queryError(ctx, err)
			return
		}
		writeJSON(ctx, out)
	default:
		writeProblem(ctx, "not-found", "no such endpoint")
	}
}

// filtersArg reads filters=dimension==value|dimension!=value|dimension~value
// (separated by ";"), the v1-style shorthand.
func filtersArg(v string) ([]query.DimFilter, error) {
	var out []query.DimFilter
	for _, part := range strings.Split(v, ";") {
		if part == "" {
			continue
		}
		for _, op := range []struct{ sep, name string }{{"!=", "is_not"}, {"==", "is"}, {"~", "contains"}} {
			if d, val, ok := strings.Cut(part, op.sep); ok {
				out = append(out, query.DimFilter{Dimension: d, Op: op.name, Values: strings.Split(val, "|")})
				goto next
			}
		}
		return nil, errors.New("bad filter " + strconv.Quote(part))
	next:
	}
	return out, nil
}

// SiteAggregateAnswer is the JSON of GET /v1/sites/{id}/stats/aggregate.
type SiteAggregateAnswer struct {
	query.SiteMetrics
	From      time.Time `json:"from"`
	To        time.Time `json:"to"`
	Timezone  string    `json:"timezone"`
	Estimated []string  `json:"estimated"`
	// FromRawEvents: filters on several dimensions, counted exactly from
	// the raw events (visitors then not estimated).
	FromRawEvents bool `json:"from_raw_events,omitempty"`
	// DroppedEvents is how many events of the site, in the hours the
	// range touches, the edges dropped before writing them (a full queue
	// or disk, a failed write): the numbers above are short by up to that
	// much (query.Backend.DroppedEvents).
	DroppedEvents int64 `json:"dropped_events"`
}

func (a *stats) serveSite(ctx *fasthttp.RequestCtx, s store.Site, what string) {
	args := ctx.QueryArgs()
	switch what {
	case "heatmap":
		a.serveSiteHeatmap(ctx, s) // sitepages.go
		return
	case "goals":
		a.serveSiteGoals(ctx, s) // sitepages.go
		return
	case "export":
		a.serveSiteExport(ctx, s) // export.go
		return
	}
	if what == "realtime" {
		out, err := a.b.SiteRealtime(s.ID)
		if err != nil {
			a.queryError(ctx, err)
			return
		}
		writeJSON(ctx, out)
		return
	}
	r, err := a.parseRange(args, s.Timezone)
	if err != nil {
		writeProblem(ctx, "invalid-request", err.Error())
		return
	}
	filters, err := filtersArg(string(args.Peek("filters")))
	if err != nil {
		writeProblem(ctx, "invalid-request", err.Error())
		return
	}
	raw := query.NeedsRaw("", filters)
	estimated := []string{"visitors"}
	if raw {
		estimated = []string{}
	}
	dropped, err := a.b.DroppedEvents(ingest.ScopeSite, s.ID, r)
	if err != nil {
		a.queryError(ctx, err)
		return
	}
	switch what {
	case "aggregate":
		m, err := a.b.SiteAggregate(s.ID, r, filters)
		if err != nil {
			a.queryError(ctx, err)
			return
		}
		writeJSON(ctx, SiteAggregateAnswer{SiteMetrics: m, From: r.From, To: r.To, Timezone: r.Location().String(),
			Estimated: estimated, FromRawEvents: raw, DroppedEvents: dropped})
	case "timeseries":
		g, err := granularityArg(args)
		if err != nil {
			writeProblem(ctx, "invalid-request", err.Error())
			return
		}
		pts, err := a.b.SiteTimeseries(s.ID, r, g, filters)
		if err != nil {
			a.queryError(ctx, err)
			return
		}
		out := map[string]any{"granularity": g, "timezone": r.Location().String(), "series": pts, "estimated": estimated,
			"dropped_events": dropped}
		if raw {
			out["from_raw_events"] = true
		}
		writeJSON(ctx, out)
	case "breakdown":
		limit, err := limitArg(args)
		if err != nil {
			writeProblem(ctx, "invalid-request", err.Error())
			return
		}
		out, err := a.b.SiteBreakdown(s.ID, string(args.Peek("dimension")), r, limit, filters)
		if err != nil {
			a.queryError(ctx, err)
			return
		}
		out.DroppedEvents = dropped
		writeJSON(ctx, out)
	default:
		writeProblem(ctx, "not-found", "no such endpoint")
	}
}
