package api

import (
	"errors"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/plausible"
	"github.com/waymark/waymark/rollup/query"
)

// maxV2Body bounds a /api/v2/query body.
const maxV2Body = 64 << 10

// serveV2 answers POST /api/v2/query: Plausible's Stats API v2, parsed and
// checked as Plausible does (rollup/plausible), answered by the backend
// (query.Backend.QueryV2; the embedded one answers from the rollups when
// they hold the answer exactly, otherwise from the raw events). Errors use Plausible's {"error": "..."} body, which its clients
// parse; another owner's site is 404, as every stats read here.
func (a *stats) serveV2(ctx *fasthttp.RequestCtx, owner string) {
	body := ctx.PostBody()
	if len(body) > maxV2Body {
		v2Error(ctx, fasthttp.StatusRequestEntityTooLarge, "Query body is larger than "+strconv.Itoa(maxV2Body)+" bytes.")
		return
	}
	siteID, err := plausible.SiteIDFromBody(body)
	if err != nil {
		v2Error(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	}
	site, ok := a.auth.SiteByDomain(siteID)
	if !ok || site.Owner != owner {
		v2Error(ctx, fasthttp.StatusNotFound, "Invalid API key or site ID. Please make sure you're using a valid API key with access to the site you've requested.")
		return
	}
	start, err := a.b.SiteStatsStart(site.ID)
	if err != nil {
		v2Error(ctx, fasthttp.StatusServiceUnavailable, "The aggregator is shutting down.")
		return
	}
	q, err := plausible.Parse(body, query.PlausibleSite(site, start), a.now())
	if err != nil {
		v2Error(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	}
	res, err := a.b.QueryV2(site.ID, q)
	var qe *plausible.QueryError
	var se *plausible.ScanLimitError
	switch {
	case errors.As(err, &qe), errors.As(err, &se), errors.Is(err, query.ErrUnsupportedQuery):
		v2Error(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	case errors.Is(err, query.ErrClosed):
		v2Error(ctx, fasthttp.StatusServiceUnavailable, "The aggregator is shutting down.")
		return
	case err != nil:
		a.log().Error("cannot answer a v2 query", "site", site.ID, "err", err)
		v2Error(ctx, fasthttp.StatusInternalServerError, "The query could not be answered.")
		return
	}
	if res.DroppedEvents, err = a.b.DroppedEvents(ingest.ScopeSite, site.ID, query.Range{From: q.From, To: q.To}); err != nil {
		if errors.Is(err, query.ErrClosed) {
			v2Error(ctx, fasthttp.StatusServiceUnavailable, "The aggregator is shutting down.")
			return
		}
		a.log().Error("cannot read drop tallies", "site", site.ID, "err", err)
		v2Error(ctx, fasthttp.StatusInternalServerError, "The query could not be answered.")
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(res.AppendJSON(nil))
}

func v2Error(ctx *fasthttp.RequestCtx, status int, msg string) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	b := append([]byte(`{"error":`), strconv.Quote(msg)...)
	ctx.SetBody(append(b, '}'))
}
