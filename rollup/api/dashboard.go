package api

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"

	"github.com/valyala/fasthttp"
)

// The dashboard is three static files: the page, its script and its style
// sheet. They are embedded so every node serves the same build with no
// setup, and they are fetched from the same origin only (see dashboardCSP).
//
//go:embed dashboard/index.html dashboard/app.js dashboard/style.css
var dashboardFiles embed.FS

// DashboardPath is where a node mounts DashboardHandler. The script and the
// style sheet are served from the same exact path, as ?asset=NAME&v=HASH,
// so one route serves the whole dashboard.
const DashboardPath = "/dashboard"

// dashboardCSP lets the page load and call nothing but its own origin: no
// inline script or style, no third party, no framing.
const dashboardCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; " +
	"form-action 'self'; frame-ancestors 'none'"

// Cache lifetimes: the page is revalidated hourly (cheap, thanks to the
// ETag); the script and style sheet are named by their content hash in the
// page, so a matching request can be cached for good.
const (
	pageCacheControl      = "public, max-age=3600"
	immutableCacheControl = "public, max-age=31536000, immutable"
	staleCacheControl     = "public, max-age=300" // an asset asked for by an older hash
)

// dashboardAsset is one file, ready to serve.
type dashboardAsset struct {
	contentType string
	body        []byte
	gzipped     []byte // nil when gzip would not make it smaller
	etag        string // weak: the identity and gzip forms are equivalent
	version     string // the content hash the page puts in the asset's URL
}

// DashboardHandler serves the owner's dashboard (GET and HEAD): the page at
// DashboardPath and its script and style sheet at DashboardPath?asset=app.js
// and ?asset=style.css. The page itself holds no data; its script reads the
// stats API with the API key the owner pastes, kept in sessionStorage.
func DashboardHandler() fasthttp.RequestHandler {
	js := newDashboardAsset("app.js", "text/javascript; charset=utf-8", nil)
	css := newDashboardAsset("style.css", "text/css; charset=utf-8", nil)
	page := newDashboardAsset("index.html", "text/html; charset=utf-8", func(b []byte) []byte {
		b = bytes.ReplaceAll(b, []byte("{{app.js}}"), []byte(DashboardPath+"?asset=app.js&amp;v="+js.version))
		return bytes.ReplaceAll(b, []byte("{{style.css}}"), []byte(DashboardPath+"?asset=style.css&amp;v="+css.version))
	})
	assets := map[string]*dashboardAsset{"": page, "app.js": js, "style.css": css}

	return func(ctx *fasthttp.RequestCtx) {
		if !ctx.IsGet() && !ctx.IsHead() {
			ctx.Error("method not allowed\n", fasthttp.StatusMethodNotAllowed) // resets the headers
			ctx.Response.Header.Set("Allow", "GET, HEAD")
			return
		}
		args := ctx.QueryArgs()
		a, ok := assets[string(args.Peek("asset"))]
		if !ok {
			ctx.Error("not found\n", fasthttp.StatusNotFound)
			return
		}
		h := &ctx.Response.Header
		h.Set("Content-Security-Policy", dashboardCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Vary", "Accept-Encoding")
		h.Set("ETag", a.etag)
		switch {
		case a == page:
			h.Set("Cache-Control", pageCacheControl)
		case string(args.Peek("v")) == a.version:
			h.Set("Cache-Control", immutableCacheControl)
		default:
			h.Set("Cache-Control", staleCacheControl)
		}
		if etagMatches(ctx.Request.Header.Peek("If-None-Match"), a.etag) {
			ctx.SetStatusCode(fasthttp.StatusNotModified)
			return
		}
		h.SetContentType(a.contentType)
		if a.gzipped != nil && ctx.Request.Header.HasAcceptEncoding("gzip") {
			h.Set("Content-Encoding", "gzip")
			ctx.Response.SetBodyRaw(a.gzipped) // shared and never written to
			return
		}
		ctx.Response.SetBodyRaw(a.body)
	}
}

// newDashboardAsset reads an embedded file, rewrites it (the page names its
// assets by hash) and prepares its gzip form and its validators.
func newDashboardAsset(name, contentType string, rewrite func([]byte) []byte) *dashboardAsset {
	body, err := dashboardFiles.ReadFile("dashboard/" + name)
	if err != nil {
		panic(fmt.Sprintf("BUG: embedded dashboard file %s is missing: %v", name, err))
	}
	if rewrite != nil {
		body = rewrite(body)
	}
	sum := sha256.Sum256(body)
	version := hex.EncodeToString(sum[:8])
	a := &dashboardAsset{contentType: contentType, body: body, etag: `W/"` + version + `"`, version: version}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression) // the level is valid
	zw.Write(body)                                           // a bytes.Buffer does not fail
	zw.Close()
	if buf.Len() < len(body) {
		a.gzipped = buf.Bytes()
	}
	return a
}

// etagMatches applies If-None-Match's weak comparison: "*", or any listed
// tag equal to etag once a W/ prefix is ignored on either side.
func etagMatches(header []byte, etag string) bool {
	want := bytes.TrimPrefix([]byte(etag), []byte("W/"))
	for _, tag := range bytes.Split(header, []byte(",")) {
		tag = bytes.TrimSpace(tag)
		if string(tag) == "*" || bytes.Equal(bytes.TrimPrefix(tag, []byte("W/")), want) {
			return true
		}
	}
	return false
}
