package ingest

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"

	"github.com/valyala/fasthttp"
)

// trackerJS is the tracker served at /s.js, hand-written to stay under
// 2 KB gzipped (a test holds it to that).
//
//go:embed s.js
var trackerJS []byte

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
