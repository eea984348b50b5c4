package ingest

import (
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"
	"github.com/waymark/waymark/store"
)

// DroppedHeader names why an accepted (202) event was not stored.
const DroppedHeader = "X-Waymark-Dropped"

// EventHandler serves POST /api/event, wire-compatible with Plausible's
// events API. Checks run cheapest first: body size (413), shape (400 with
// a JSON reason), known site and matching Origin, then the per-IP and
// per-site token buckets. Events dropped on purpose still get 202, with
// the reasons in the X-Waymark-Dropped header and in metrics, so a tracker
// never retries them. A text/plain body is read as JSON, which lets
// browsers post without a CORS preflight.
func (p *Pipeline) EventHandler() fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		ctx.Response.Header.Set("Access-Control-Allow-Origin", "*")
		switch {
		case ctx.IsOptions():
			ctx.Response.Header.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
			ctx.Response.Header.Set("Access-Control-Allow-Headers", "Content-Type")
			ctx.Response.Header.Set("Access-Control-Max-Age", "86400")
			ctx.SetStatusCode(fasthttp.StatusNoContent)
			return
		case !ctx.IsPost():
			ctx.Response.Header.Set("Allow", "POST, OPTIONS")
			writeJSONError(ctx, fasthttp.StatusMethodNotAllowed, "request", "method must be POST")
			return
		}
		if ctx.Request.Header.ContentLength() > p.cfg.MaxBodyBytes || len(ctx.PostBody()) > p.cfg.MaxBodyBytes {
			p.m.drop(DropInvalid)
			writeJSONError(ctx, fasthttp.StatusRequestEntityTooLarge, "request", "body is larger than "+strconv.Itoa(p.cfg.MaxBodyBytes)+" bytes")
			return
		}
		in, bad := parseEventJSON(ctx.PostBody())
		if bad != nil {
			p.m.drop(DropInvalid)
			writeJSONError(ctx, fasthttp.StatusBadRequest, bad.field, bad.problem)
			return
		}
		var reasons dropReasonSet
		p.acceptSiteEvents(ctx, &in, &reasons)
		if reasons != 0 {
			ctx.Response.Header.Set(DroppedHeader, reasons.String())
		}
		ctx.SetStatusCode(fasthttp.StatusAccepted)
		ctx.SetContentType("application/json")
		ctx.SetBodyString("{}")
	}
}

// acceptSiteEvents fans one request out to every site it names.
func (p *Pipeline) acceptSiteEvents(ctx *fasthttp.RequestCtx, in *siteEventInput, reasons *dropReasonSet) {
	if p.closed.Load() {
		for range in.domains {
			p.m.drop(DropClosed)
		}
		reasons.add(DropClosed)
		return
	}
	origin := originHost(ctx.Request.Header.Peek("Origin"))
	var sites [maxFanOut]store.Site
	n := 0
	for _, d := range in.domains {
		site, ok := p.cfg.Sites.Lookup(d)
		switch {
		case !ok:
			p.m.drop(DropUnknownSite)
			reasons.add(DropUnknownSite)
		case origin != "" && !domainMatches(origin, normalizeDomain(site.Domain)):
			p.m.drop(DropOrigin)
			reasons.add(DropOrigin)
		case p.skipForPrivacy(ctx, site.IgnoreDNT, reasons): // DNT: 1 or Sec-GPC: 1 (privacy.go)
		default:
			sites[n] = site
			n++
		}
	}
	if n == 0 {
		return
	}
	now := p.now()
	ip, country := p.clientOf(ctx)
	if !p.limits.allowIP(ip, now) {
		for range n {
			p.m.drop(DropRateLimit)
		}
		reasons.add(DropRateLimit)
		return
	}
	ua := ctx.Request.Header.UserAgent()
	for _, site := range sites[:n] {
		if !p.limits.allowSite(site.ID, now) {
			p.m.drop(DropRateLimit)
			reasons.add(DropRateLimit)
			continue
		}
		pe := p.pool.Get().(*pending)
		ev := &pe.ev
		ev.Kind, ev.Flags, ev.Name = in.kind, in.flags, in.name
		ev.Time, ev.ClientTime = now.UnixMilli(), in.clientTime
		ev.SiteID = site.ID
		ev.Path, ev.ReferrerHost = in.page.path, in.refHost
		ev.UTMSource, ev.UTMMedium, ev.UTMCampaign = in.page.utm[0], in.page.utm[1], in.page.utm[2]
		ev.UTMTerm, ev.UTMContent = in.page.utm[3], in.page.utm[4]
		ev.ScreenWidth, ev.EngagedMS, ev.ScrollDepth = in.screenWidth, in.engagedMS, in.scrollDepth
		ev.Props = append(ev.Props, in.props...)
		pe.ua = append(pe.ua[:0], ua[:min(len(ua), maxUALen)]...)
		pe.ip, pe.country = ip, country
		if !p.enqueue(pe) {
			reasons.add(DropQueueFull)
		}
	}
}

// originHost is the host of an Origin header, or "" when there is none
// (server-side senders) or it is "null".
func originHost(origin []byte) string {
	if len(origin) == 0 {
		return ""
	}
	return normalizeDomain(string(referrerHost(origin)))
}

// domainMatches accepts the site's domain and its subdomains.
func domainMatches(host, domain string) bool {
	return host == domain || strings.HasSuffix(host, "."+domain)
}

// dropReasonSet is a small set of drop reasons for the response header.
type dropReasonSet uint16

func (s *dropReasonSet) add(reason string) {
	for i, r := range dropReasons {
		if r == reason {
			*s |= 1 << i
		}
	}
}

func (s dropReasonSet) String() string {
	var parts []string
	for i, r := range dropReasons {
		if s&(1<<i) != 0 {
			parts = append(parts, r)
		}
	}
	return strings.Join(parts, ",")
}

// writeJSONError answers with a JSON reason, in Plausible's shape
// ({"errors": {field: [problem]}}) plus one readable "error" line.
func writeJSONError(ctx *fasthttp.RequestCtx, status int, field, problem string) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	b := []byte(`{"error":`)
	b = strconv.AppendQuote(b, field+" "+problem)
	b = append(b, `,"errors":{`...)
	b = strconv.AppendQuote(b, field)
	b = append(b, ":["...)
	b = strconv.AppendQuote(b, problem)
	b = append(b, "]}}"...)
	ctx.SetBody(b)
}
