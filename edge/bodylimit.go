package edge

import (
	"bytes"
	"strconv"

	"github.com/valyala/fasthttp"
)

// Body limits are applied when the request headers have arrived, before
// fasthttp reads the body: a client announcing a 16 MB body to a route
// that takes 16 KB gets its 413 at once, and the server never holds more
// than the route's limit for it. Chunked bodies are cut off at the limit
// while they are read.

// bodyLimits is the per-path cap on request bodies.
type bodyLimits struct {
	def   int            // every path not listed
	api   int            // /v1/...
	exact map[string]int // exact paths
}

func newBodyLimits(def int, exact map[string]int) bodyLimits {
	l := bodyLimits{def: def, api: min(def, maxBodyBytes), exact: make(map[string]int, len(exact))}
	for path, n := range exact {
		if n > 0 {
			l.exact[path] = n
		}
	}
	return l
}

// largest is what fasthttp's server-wide limit must allow.
func (l bodyLimits) largest() int {
	n := l.def
	for _, m := range l.exact {
		n = max(n, m)
	}
	return n
}

// forPath returns the limit for a request path (no query).
func (l bodyLimits) forPath(path []byte) int {
	if n, ok := l.exact[string(path)]; ok {
		return n
	}
	if bytes.HasPrefix(path, prefixAPI) {
		return l.api
	}
	return l.def
}

// headerReceived is fasthttp's Server.HeaderReceived: it picks the body
// limit from the request target. GET and HEAD (the redirect hot path)
// keep the default without looking at the path.
func (s *Server) headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if h.IsGet() || h.IsHead() {
		return fasthttp.RequestConfig{MaxRequestBodySize: s.limits.def}
	}
	return fasthttp.RequestConfig{MaxRequestBodySize: s.limits.forPath(requestPath(h.RequestURI()))}
}

// requestPath is the path of a request target: origin form up to the
// query, or the path of an absolute form.
func requestPath(uri []byte) []byte {
	if len(uri) > 0 && uri[0] != '/' {
		if i := bytes.Index(uri, []byte("://")); i >= 0 {
			uri = uri[i+3:]
			if j := bytes.IndexByte(uri, '/'); j >= 0 {
				uri = uri[j:]
			} else {
				uri = nil
			}
		}
	}
	if i := bytes.IndexAny(uri, "?#"); i >= 0 {
		uri = uri[:i]
	}
	return uri
}

// tooLargeDetail names the limit of the path a refused body was sent to.
func (s *Server) tooLargeDetail(ctx *fasthttp.RequestCtx) string {
	return "request body is larger than this endpoint accepts; the limit is " + strconv.Itoa(s.limits.forPath(ctx.Path())) + " bytes"
}
