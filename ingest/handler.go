package ingest

import (
	"slices"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"
	"github.com/waymark/waymark/store"
)

// DroppedHeader names why an accepted (202) event was not stored.
const DroppedHeader = "X-Waymark-Dropped"

// Response header names and values, as raw bytes so fasthttp neither
// normalises nor copies them per request.
var (
	hdrACAO      = []byte("Access-Control-Allow-Origin")
	hdrOrigin    = []byte("Origin")
	valStar      = []byte("*")
	valJSON      = []byte("application/json")
	bodyAccepted = []byte("{}")
)

// EventHandler serves POST /api/event, wire-compatible with Plausible's
// events API. Checks run cheapest first: body size (413), shape (400 with
// a JSON reason), known site and matching Origin, then the per-IP and
// per-site token buckets. Events dropped on purpose still get 202, with
// the reasons in the X-Waymark-Dropped header and in metrics, so a tracker
// never retries them. A text/plain body is read as JSON, which lets
// browsers post without a CORS preflight. An accepted request allocates
// nothing.
func (p *Pipeline) EventHandler() fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		ctx.Response.Header.SetCanonical(hdrACAO, valStar)
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
		ep := getEventParser()
		defer ep.release()
		in, bad := ep.parse(ctx.PostBody())
		if bad != nil {
			p.m.drop(DropInvalid)
			writeJSONError(ctx, fasthttp.StatusBadRequest, bad.field, bad.problem)
			return
		}
		var reasons dropReasonSet
		p.acceptSiteEvents(ctx, in, &reasons, &ep.scratch)
		if reasons != 0 {
			ctx.Response.Header.Set(DroppedHeader, reasons.String())
		}
		ctx.SetStatusCode(fasthttp.StatusAccepted)
		ctx.Response.Header.SetContentTypeBytes(valJSON)
		ctx.Response.SetBodyRaw(bodyAccepted)
	}
}

// acceptSiteEvents fans one request out to every site it names.
func (p *Pipeline) acceptSiteEvents(ctx *fasthttp.RequestCtx, in *siteEventInput, reasons *dropReasonSet, scratch *[]byte) {
	if p.closed.Load() {
		for range in.nDomains {
			p.m.drop(DropClosed)
		}
		reasons.add(DropClosed)
		return
	}
	origin := originHost(ctx.Request.Header.PeekCanonical(hdrOrigin), scratch)
	var sites [maxFanOut]store.Site
	n := 0
	for _, d := range in.domainList() {
		site, ok := p.cfg.Sites.Lookup(d)
		switch {
		case !ok:
			p.m.drop(DropUnknownSite)
			reasons.add(DropUnknownSite)
		case origin != "" && !domainMatches(origin, normalizeDomainView(site.Domain, scratch)):
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
		pe.fillSiteEvent(in, site.ID, now.UnixMilli())
		pe.ua = append(pe.ua[:0], ua[:min(len(ua), maxUALen)]...)
		pe.ip, pe.country = ip, country
		if !p.enqueue(pe) {
			reasons.add(DropQueueFull)
		}
	}
}

// fillSiteEvent copies a site event into pe: its strings into pe.buf
// (grown once, so the views taken while copying stay put), since the
// request's bytes are reused as soon as the handler returns.
func (pe *pending) fillSiteEvent(in *siteEventInput, siteID string, now int64) {
	need := len(in.name) + len(in.page.path) + len(in.refHost)
	for _, u := range in.page.utm {
		need += len(u)
	}
	for _, pr := range in.props {
		need += len(pr.Key) + len(pr.Value)
	}
	pe.buf = slices.Grow(pe.buf[:0], need)
	ev := &pe.ev
	ev.Kind, ev.Flags, ev.Time, ev.SiteID = in.kind, in.flags, now, siteID
	ev.Name = pe.keep(in.name)
	ev.Path, ev.ReferrerHost = pe.keep(in.page.path), pe.keep(in.refHost)
	ev.UTMSource, ev.UTMMedium, ev.UTMCampaign = pe.keep(in.page.utm[0]), pe.keep(in.page.utm[1]), pe.keep(in.page.utm[2])
	ev.UTMTerm, ev.UTMContent = pe.keep(in.page.utm[3]), pe.keep(in.page.utm[4])
	ev.EngagedMS, ev.ScrollDepth = in.engagedMS, in.scrollDepth
	for _, pr := range in.props {
		ev.Props = append(ev.Props, Prop{Key: pe.keep(pr.Key), Value: pe.keep(pr.Value)})
	}
}

// keep copies s into pe.buf, which must have room, and returns the copy.
func (pe *pending) keep(s string) string {
	if len(s) == 0 {
		return ""
	}
	if cap(pe.buf)-len(pe.buf) < len(s) {
		panic("BUG: pending.keep without room")
	}
	start := len(pe.buf)
	pe.buf = append(pe.buf, s...)
	return viewBytes(pe.buf[start:])
}

// originHost is the host of an Origin header, or "" when there is none
// (server-side senders) or it is "null". It is a view of origin or scratch.
func originHost(origin []byte, scratch *[]byte) string {
	if len(origin) == 0 {
		return ""
	}
	return normalizeDomainView(viewBytes(referrerHost(origin)), scratch)
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
