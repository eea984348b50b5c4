package edge

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/store"
)

const linksPrefix = "/v1/links/"

// serveAPI routes /v1/ requests and counts each answer by route and status.
func (s *Server) serveAPI(ctx *fasthttp.RequestCtx) {
	route := s.dispatchAPI(ctx)
	s.m.apiRequest(route, ctx.Response.StatusCode())
}

func (s *Server) dispatchAPI(ctx *fasthttp.RequestCtx) string {
	path := string(ctx.Path())
	method := string(ctx.Method())
	switch {
	case path == "/v1/links":
		switch method {
		case fasthttp.MethodPost:
			s.createLinkLimited(ctx)
			return "links.create"
		case fasthttp.MethodGet:
			s.withOwner(ctx, false, s.listLinks)
			return "links.list"
		}
		methodNotAllowed(ctx, "GET, POST")
		return "links"
	case path == bulkPath && method == fasthttp.MethodPost:
		s.createLimited(ctx, s.createLinksBulk)
		return "links.bulk"
	case path == exportPath && method == fasthttp.MethodGet:
		s.withOwner(ctx, false, s.exportLinks)
		return "links.export"
	case strings.HasPrefix(path, linksPrefix) && strings.IndexByte(path[len(linksPrefix):], '/') < 0:
		code := path[len(linksPrefix):]
		switch method {
		case fasthttp.MethodGet:
			s.withOwner(ctx, false, func(ctx *fasthttp.RequestCtx, o store.Owner) { s.getLink(ctx, o, code) })
			return "links.get"
		case fasthttp.MethodPatch:
			s.withOwner(ctx, true, func(ctx *fasthttp.RequestCtx, o store.Owner) { s.updateLink(ctx, o, code) })
			return "links.update"
		case fasthttp.MethodDelete:
			s.withOwner(ctx, true, func(ctx *fasthttp.RequestCtx, o store.Owner) { s.deleteLink(ctx, o, code) })
			return "links.delete"
		}
		methodNotAllowed(ctx, "GET, PATCH, DELETE")
		return "link"
	case path == reportsPath:
		s.reports.serve(ctx)
		return "reports.file"
	}
	if route, ok := s.dispatchShares(ctx, path, method); ok { // shares.go
		return route
	}
	if code, ok := historyCode(path); ok {
		if method != fasthttp.MethodGet {
			methodNotAllowed(ctx, "GET")
			return "links.history"
		}
		s.withOwner(ctx, false, func(ctx *fasthttp.RequestCtx, o store.Owner) { s.linkHistory(ctx, o, code) })
		return "links.history"
	}
	if code, ok := linkSubresource(path, qrSuffix); ok {
		if method != fasthttp.MethodGet {
			methodNotAllowed(ctx, "GET")
			return "links.qr"
		}
		s.withOwner(ctx, false, func(ctx *fasthttp.RequestCtx, o store.Owner) { s.linkQR(ctx, o, code) })
		return "links.qr"
	}
	if route, ok := s.dispatchSites(ctx, path, method); ok {
		return route
	}
	if route, ok := s.dispatchKeys(ctx, path, method); ok {
		return route
	}
	if route, ok := s.dispatchDomains(ctx, path, method); ok {
		return route
	}
	if route, ok := s.dispatchWebhooks(ctx, path, method); ok {
		return route
	}
	if s.cfg.APIFallback != nil {
		// The stats are answered outside edge; their key and its scope
		// are checked here, from scopeTable, like every other route's. A
		// stats-like path without a row (a trailing slash, say) needs
		// every scope rather than none.
		if hasScopeRow(path) || strings.Contains(path, "/stats") {
			if _, _, ok := s.authenticate(ctx); !ok {
				return "other"
			}
		}
		s.cfg.APIFallback(ctx)
		return "other"
	}
	writeProblem(ctx, probNotFound, "there is no API endpoint at "+path)
	return "unknown"
}

func methodNotAllowed(ctx *fasthttp.RequestCtx, allow string) {
	writeProblem(ctx, probMethodNotAllowed, "this endpoint answers "+allow)
	ctx.Response.Header.Set("Allow", allow)
}

// withOwner authenticates the caller and, for writes, takes a token from
// the caller's bucket before running fn.
func (s *Server) withOwner(ctx *fasthttp.RequestCtx, write bool, fn func(*fasthttp.RequestCtx, store.Owner)) {
	owner, key, ok := s.authenticate(ctx)
	if !ok {
		return
	}
	if write && !s.allowWrite(ctx, key) {
		return
	}
	fn(ctx, owner)
}

// allowWrite takes a token from the key's write bucket, or answers 429.
func (s *Server) allowWrite(ctx *fasthttp.RequestCtx, key store.KeyHash) bool {
	if s.limiter == nil {
		return true
	}
	if ok, wait := s.limiter.allow(key); !ok {
		s.m.rateLimited.Inc()
		secs := int((wait + time.Second - 1) / time.Second)
		writeRetryProblem(ctx, probRateLimited, "too many writes with this API key; retry in "+strconv.Itoa(max(1, secs))+" s", secs)
		return false
	}
	return true
}

// readBody returns the request body, or answers 413 when it is too large.
func readBody(ctx *fasthttp.RequestCtx) ([]byte, bool) {
	b := ctx.PostBody()
	if len(b) > maxBodyBytes {
		writeProblem(ctx, probTooLarge, "request body is "+strconv.Itoa(len(b))+" bytes; the limit is "+strconv.Itoa(maxBodyBytes))
		return nil, false
	}
	return b, true
}

// writeContext bounds a replicated write. It does not derive from the
// RequestCtx: that one only works inside a running fasthttp.Server, and a
// write already submitted should get its full chance to commit.
func (s *Server) writeContext(*fasthttp.RequestCtx) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.cfg.ApplyTimeout)
}

// writeWriteError answers a failed replicated write.
func (s *Server) writeWriteError(ctx *fasthttp.RequestCtx, what string, err error) {
	switch {
	case store.IsStorageFull(err):
		writeRetryProblem(ctx, probStorageFull, "the node's disk is full, so the "+what+" was not made; redirects keep working", 5)
	case errors.Is(err, store.ErrNoLeader):
		writeRetryProblem(ctx, probUnavailable, "the cluster has no leader right now, so the "+what+" was not made; retry shortly", 1)
	case errors.Is(err, store.ErrRefused):
		// Checked before the unknown outcome: the leader turned the
		// command away before its log, so nothing happened.
		writeProblem(ctx, probInvalidRequest, "the cluster leader refused the "+what+" as unreadable (are this node and the leader on different versions?); it was not made")
	case errors.Is(err, store.ErrRegionUnclaimed):
		s.log.Error("cannot generate codes: this node's region is not claimed", "what", what, "err", err)
		writeRetryProblem(ctx, probUnavailable, "this node's region has no slot of the code space yet, so the "+what+" was not made; an operator claims it with `waymark regions add`, or create through a node of another region", 30)
	case errors.Is(err, store.ErrClusterKeyMismatch):
		s.log.Error("cannot forward write: this node's cluster key differs from the leader's", "what", what, "err", err)
		writeRetryProblem(ctx, probUnavailable, "this node cannot write through the cluster leader (their cluster keys differ), so the "+what+" was not made; retry through another node", 30)
	case errors.Is(err, store.ErrUnknownOutcome), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		writeRetryProblem(ctx, probUnavailable, "the "+what+" may or may not have been applied (the cluster did not confirm it in time); retry, with the same Idempotency-Key for a create", 1)
	default:
		s.log.Error("cannot complete write", "what", what, "err", err)
		writeProblem(ctx, probInternal, "the "+what+" failed")
	}
}

// writeJSON answers with a JSON body built by marshalJSON.
func writeJSON(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetBody(body)
}

func setIndex(ctx *fasthttp.RequestCtx, index uint64) {
	ctx.Response.Header.Set("Waymark-Index", strconv.FormatUint(index, 10))
}
