package api

import (
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/rollup/query"
	"github.com/waymark/waymark/store"
)

// serveSiteHeatmap answers GET /v1/sites/{id}/stats/heatmap with period=
// or from/to/tz.
func (a *stats) serveSiteHeatmap(ctx *fasthttp.RequestCtx, s store.Site) {
	r, err := a.siteRangeArg(ctx.QueryArgs(), s.Timezone)
	if err != nil {
		writeProblem(ctx, "invalid-request", err.Error())
		return
	}
	out, err := a.b.SiteHeatmap(s.ID, r)
	if err != nil {
		a.queryError(ctx, err)
		return
	}
	writeJSON(ctx, out)
}

// siteRangeArg reads period= (Plausible's relative ranges) or, without it,
// from/to as the other site stats do; tz defaults to the site's zone.
func (a *stats) siteRangeArg(args *fasthttp.Args, siteTZ string) (query.Range, error) {
	p := string(args.Peek("period"))
	if p == "" {
		return a.parseRange(args, siteTZ)
	}
	if len(args.Peek("from")) > 0 || len(args.Peek("to")) > 0 {
		return query.Range{}, errors.New("give period or from/to, not both")
	}
	loc, err := tzArg(args, siteTZ)
	if err != nil {
		return query.Range{}, err
	}
	return query.PeriodRange(p, a.now(), loc)
}

// serveSiteGoals answers GET /v1/sites/{id}/stats/goals with period= or
// from/to/tz.
func (a *stats) serveSiteGoals(ctx *fasthttp.RequestCtx, s store.Site) {
	r, err := a.siteRangeArg(ctx.QueryArgs(), s.Timezone)
	if err != nil {
		writeProblem(ctx, "invalid-request", err.Error())
		return
	}
	out, err := a.b.SiteGoalStats(s.ID, s.Goals, r)
	if err != nil {
		a.queryError(ctx, err)
		return
	}
	writeJSON(ctx, out)
}
