package api

import (
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/rollup/query"
)

// Grant is what a shared dashboard's token opens (issue 13 point 6): the
// stats reads of one site or one link of one owner. The node has checked
// the token, the share's password cookie and that the path names the
// share's own site or link; GrantHandler checks the last again, so a
// grant never reads anything else.
type Grant struct {
	Owner string
	Site  string // a site share: the site id
	Link  string // a link share: the short code as in the path
}

// GrantHandler answers the stats GETs of a grant: path is the /v1/... path
// of StatsHandler's link and site endpoints (the export included; the
// Stats API v2 is not part of a share). Another site or link answers 404.
func GrantHandler(b query.Backend, auth Authorizer, cfg Config) func(ctx *fasthttp.RequestCtx, g Grant, path string) {
	a := &stats{b: b, auth: auth, cfg: cfg}
	return func(ctx *fasthttp.RequestCtx, g Grant, path string) {
		if !ctx.IsGet() && !ctx.IsHead() {
			ctx.Response.Header.Set("Allow", "GET, HEAD")
			writeProblem(ctx, "method-not-allowed", "a shared dashboard is read-only")
			return
		}
		parts := strings.Split(strings.Trim(path, "/"), "/")
		switch {
		case g.Link != "" && len(parts) >= 4 && len(parts) <= 5 && parts[0] == "v1" && parts[1] == "links" && parts[2] == g.Link && parts[3] == "stats":
			l, ok := auth.Link(parts[2])
			if !ok || l.Owner != g.Owner {
				writeProblem(ctx, "not-found", "no such link")
				return
			}
			a.serveLink(ctx, l.Code, parts[4:])
		case g.Site != "" && len(parts) == 5 && parts[0] == "v1" && parts[1] == "sites" && parts[2] == g.Site && parts[3] == "stats":
			s, ok := auth.Site(parts[2])
			if !ok || s.Owner != g.Owner {
				writeProblem(ctx, "not-found", "no such site")
				return
			}
			a.serveSite(ctx, s, parts[4])
		default:
			writeProblem(ctx, "not-found", "a shared dashboard reads only the stats of its own site or link")
		}
	}
}
