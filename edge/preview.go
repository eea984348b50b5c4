package edge

import (
	"html"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/store"
)

// Social previews (issue 13.4). A link may carry a title, a description
// and an image; the unfurlers of chat and social apps (crawlers.go) get a
// small page with Open Graph and Twitter card tags and a meta refresh to
// the destination, everyone else the redirect as before. Everything shown
// is what the owner gave: the service never fetches the destination.
//
// A crawler's fetch counts as a click the way every other crawler's
// redirect does: the click is captured and the analytics mark it bot from
// its user agent, so it is kept apart from people's clicks.

// previewMeta renders p's Open Graph and Twitter card tags, escaped.
func previewMeta(p store.Preview) string {
	if p.IsZero() {
		return ""
	}
	var b strings.Builder
	meta := func(attr, name, content string) {
		if content == "" {
			return
		}
		b.WriteString(`<meta ` + attr + `="` + name + `" content="` + html.EscapeString(content) + "\">\n")
	}
	meta("property", "og:type", "website")
	meta("property", "og:title", p.Title)
	meta("property", "og:description", p.Description)
	meta("property", "og:image", p.Image)
	card := "summary"
	if p.Image != "" {
		card = "summary_large_image"
	}
	meta("name", "twitter:card", card)
	meta("name", "twitter:title", p.Title)
	meta("name", "twitter:description", p.Description)
	meta("name", "twitter:image", p.Image)
	if p.Description != "" {
		meta("name", "description", p.Description)
	}
	return b.String()
}

// previewPage is what crawlers get for a link with a preview: the tags,
// then a meta refresh and a plain link to the destination. No og:url: an
// unfurler would follow it to the destination's own tags.
func previewPage(p store.Preview, dest string) []byte {
	d := html.EscapeString(dest)
	head := previewMeta(p) + `<meta http-equiv="refresh" content="0; url=` + d + "\">\n"
	title := p.Title
	if title == "" {
		title = "Redirecting"
	}
	body := `<p>` + html.EscapeString(p.Description) + `</p><p><a href="` + d + `" rel="noreferrer">Continue</a></p>`
	return pageWithHead(title, head, body)
}

// serveGated answers a live redirect entry with a password or a preview:
// the form, the preview page for a crawler, or the redirect.
func (s *Server) serveGated(ctx *fasthttp.RequestCtx, e *entry, code []byte, now int64, hit bool) {
	g := e.gated
	if g.passwordHash != "" {
		s.passwords.forms.Inc()
		writeFormPage(ctx, fasthttp.StatusOK, g.form)
		return
	}
	if isCrawler(ctx.Request.Header.UserAgent()) {
		s.m.previewPages.Inc()
		writePage(ctx, fasthttp.StatusOK, g.preview)
		ctx.Response.Header.SetCanonical(hdrVary, valVaryUA)
	} else if e.rules != nil {
		// Everyone else follows the rules as without a preview.
		s.m.previewRedirects.Inc()
		s.serveRules(ctx, e, code, hit, now)
		ctx.Response.Header.SetCanonical(hdrVary, valVaryUA)
		return
	} else {
		s.m.previewRedirects.Inc()
		writeRedirect(ctx, e, e.location, now)
		// A shared cache must not hand one answer to the other.
		ctx.Response.Header.SetCanonical(hdrVary, valVaryUA)
		if hit {
			s.m.redirectHit.Inc()
		} else {
			s.m.redirectMiss.Inc()
		}
	}
	if s.onRedirect != nil && !ctx.IsHead() {
		s.onRedirect(ctx, code)
	}
}
