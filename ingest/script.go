package ingest

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"

	"github.com/valyala/fasthttp"
)

// trackerJS is the tracker served at /s.js. It is minified by hand and
// served as written, to stay under maxScriptGzip gzipped (a test holds it
// to that), so this comment is its documentation. It speaks Plausible's
// /api/event and keeps nothing in the browser (no cookie, no storage).
//
// The snippet: <script defer data-domain="shop.example" src=".../s.js">,
// with these optional attributes on the script tag:
//   - data-api: the event endpoint (default: /api/event on the script's origin).
//   - data-local: count pages on localhost, 127.x, [::1] and file:, which
//     are ignored by default (Plausible's "local" script variant).
//   - data-hash: the site routes by location.hash; each route is a page
//     (Plausible's "hash" variant; events carry "h": 1).
//   - data-outbound-links: a click or middle click on a link to another
//     host sends "Outbound Link: Click" with props {url: the link}.
//   - data-file-downloads: a click or middle click on a link whose last
//     dot-separated part (before any query) is a listed extension sends
//     "File Download" with props {url: the link without its query}. The
//     list is Plausible's default, replaced by file-types="a,b" and
//     extended by add-file-types="a,b", as Plausible names them.
//
// What it sends, following Plausible's tracker (tracker/src in
// plausible/analytics):
//   - pageview: when the page is first shown; a page that is prerendering
//     (document.prerendering) or opened in a background tab waits for
//     prerenderingchange / visibilitychange. Then on every history
//     pushState, replaceState and popstate that changes the path (the path
//     and hash with data-hash, on hashchange too), and when the page is
//     restored from the back/forward cache (pageshow with persisted),
//     which starts a new engagement period.
//   - engagement (e: engaged ms, sd: scroll depth %): for the page being
//     left, before the next pageview of an SPA navigation, and whenever
//     the page is hidden, loses focus or is unloaded. Time counts only
//     while the page is visible and focused. The first engagement of a
//     page is always sent; later ones only when the visitor scrolled
//     deeper than the last one said or was engaged 3 s more. Scroll depth
//     is the deepest point seen (scroll offset plus viewport) over the
//     page height.
//   - custom events: window.waymark(name, {props, interactive, callback}),
//     also named window.plausible, so pages written for Plausible's tracker
//     work unchanged; calls queued by either name's stub (.q) included.
//
// Nothing is sent from a browser that says it is automated
// (navigator.webdriver, PhantomJS, Nightmare, Cypress) unless the page
// sets window.__waymark = true (Plausible's window.__plausible), nor from
// local pages without data-local; a custom event's callback still runs.
// Unlike Plausible's captureOnLocalhost, data-local does not lift the
// automation rule.
//
// Pageviews and custom events go by XHR (the callback runs when it is
// answered); engagements and link events by navigator.sendBeacon, which
// outlives the page, so a followed link is never held back.
//
//go:embed s.js
var trackerJS []byte

// maxScriptGzip is the bound on the gzipped tracker: the 2 KB.
const maxScriptGzip = 2048

// scriptCacheControl lets browsers and CDNs keep the script for a day and
// serve a stale copy for a week while revalidating with the ETag; the URL
// never changes, so a year-long max-age would strand old versions.
const scriptCacheControl = "public, max-age=86400, stale-while-revalidate=604800"

type scriptAsset struct {
	raw, gz []byte
	etag    string
}

func newScriptAsset() scriptAsset {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = zw.Write(trackerJS)
	_ = zw.Close()
	sum := sha256.Sum256(trackerJS)
	return scriptAsset{raw: trackerJS, gz: buf.Bytes(), etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
}

// ScriptHandler serves GET /s.js with long cache headers and an ETag
// (304 on a matching If-None-Match), gzipped when the client accepts it.
func (p *Pipeline) ScriptHandler() fasthttp.RequestHandler {
	s := p.script
	return func(ctx *fasthttp.RequestCtx) {
		if !ctx.IsGet() && !ctx.IsHead() {
			ctx.Response.Header.Set("Allow", "GET, HEAD")
			ctx.SetStatusCode(fasthttp.StatusMethodNotAllowed)
			return
		}
		h := &ctx.Response.Header
		h.Set("Cache-Control", scriptCacheControl)
		h.Set("ETag", s.etag)
		h.Set("Vary", "Accept-Encoding")
		h.Set("Access-Control-Allow-Origin", "*")
		if etagMatches(ctx.Request.Header.Peek("If-None-Match"), s.etag) {
			ctx.SetStatusCode(fasthttp.StatusNotModified)
			return
		}
		h.SetContentType("application/javascript; charset=utf-8")
		body := s.raw
		if ctx.Request.Header.HasAcceptEncoding("gzip") {
			h.Set("Content-Encoding", "gzip")
			body = s.gz
		}
		if ctx.IsHead() {
			h.SetContentLength(len(body))
			return
		}
		ctx.SetBody(body)
	}
}

// etagMatches implements If-None-Match: "*" or any listed tag, weak or not.
func etagMatches(header []byte, etag string) bool {
	for len(header) > 0 {
		var tag []byte
		tag, header, _ = bytes.Cut(header, []byte(","))
		tag = bytes.TrimSpace(tag)
		tag = bytes.TrimPrefix(tag, []byte("W/"))
		if string(tag) == "*" || string(tag) == etag {
			return true
		}
	}
	return false
}
