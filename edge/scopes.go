package edge

import (
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/store"
)

// scopeTable is the one place that says which scope each public route
// needs. authenticate checks it for every request that presents a key, so
// no handler checks a scope itself. A row's method "*" matches every
// method; in a pattern, "*" is one path segment and a final "**" is one or
// more segments. A key needs one of the row's scopes (most rows name one);
// the first matching row wins, so specific rows come first.
//
// An authenticated route with no row here needs a key with every scope:
// a route added without a row is closed to scoped keys, never open.
var scopeTable = []struct {
	method, pattern string
	scopes          store.Scopes
}{
	// Stats (answered by the aggregator through Config.APIFallback or the
	// /api/v2/query route); before the link rows that would match them.
	// Exports (issue 13 point 7) are stats reads like the rest.
	{"GET", "/v1/links/*/stats/export", store.ScopeStatsRead},
	{"GET", "/v1/sites/*/stats/export", store.ScopeStatsRead},
	{"*", "/v1/links/*/stats", store.ScopeStatsRead},
	{"*", "/v1/links/*/stats/**", store.ScopeStatsRead},
	{"*", "/v1/sites/*/stats/**", store.ScopeStatsRead},
	{"*", "/api/v2/query", store.ScopeStatsRead},

	// Links.
	{"GET", "/v1/links", store.ScopeLinksRead},
	{"POST", "/v1/links", store.ScopeLinksWrite},
	{"POST", "/v1/links/bulk", store.ScopeLinksWrite},
	{"GET", "/v1/links/*", store.ScopeLinksRead},
	{"PATCH", "/v1/links/*", store.ScopeLinksWrite},
	{"DELETE", "/v1/links/*", store.ScopeLinksWrite},
	{"GET", "/v1/links/*/history", store.ScopeLinksRead},
	{"GET", "/v1/links/*/qr", store.ScopeLinksRead},

	// Sites and goals. Reading a site is what a stats client does to find
	// its id, and what the site's editor does, so either scope reads.
	{"GET", "/v1/sites", store.ScopeStatsRead | store.ScopeSitesWrite},
	{"POST", "/v1/sites", store.ScopeSitesWrite},
	{"GET", "/v1/sites/*", store.ScopeStatsRead | store.ScopeSitesWrite},
	{"PATCH", "/v1/sites/*", store.ScopeSitesWrite},
	{"GET", "/v1/sites/*/goals", store.ScopeStatsRead | store.ScopeSitesWrite},
	{"POST", "/v1/sites/*/goals", store.ScopeSitesWrite},
	{"GET", "/v1/sites/*/goals/*", store.ScopeStatsRead | store.ScopeSitesWrite},
	{"DELETE", "/v1/sites/*/goals/*", store.ScopeSitesWrite},

	// Shared dashboards (issue 13 point 6): a share opens the stats to
	// anyone with its URL, so making or revoking one is a write of the
	// site or link; a stats reader may see which shares exist.
	{"GET", "/v1/sites/*/shares", store.ScopeStatsRead | store.ScopeSitesWrite},
	{"POST", "/v1/sites/*/shares", store.ScopeSitesWrite},
	{"DELETE", "/v1/sites/*/shares/*", store.ScopeSitesWrite},
	{"GET", "/v1/links/*/shares", store.ScopeStatsRead | store.ScopeLinksWrite},
	{"POST", "/v1/links/*/shares", store.ScopeLinksWrite},
	{"DELETE", "/v1/links/*/shares/*", store.ScopeLinksWrite},

	// Custom domains (issue 12 point 1): a link client reads them to pick
	// a domain; only domains:write changes them.
	{"GET", "/v1/domains", store.ScopeLinksRead | store.ScopeDomainsWrite},
	{"POST", "/v1/domains", store.ScopeDomainsWrite},
	{"GET", "/v1/domains/*", store.ScopeLinksRead | store.ScopeDomainsWrite},
	{"DELETE", "/v1/domains/*", store.ScopeDomainsWrite},

	// Keys: listing them shows what each can do, so it needs keys:write
	// like making and revoking them.
	{"GET", "/v1/keys", store.ScopeKeysWrite},
	{"POST", "/v1/keys", store.ScopeKeysWrite},
	{"DELETE", "/v1/keys/*", store.ScopeKeysWrite},

	// Webhooks (issue 13 point 5): a webhook is a feed of the owner's
	// link changes, so reading them takes links:read and changing them
	// links:write (no scope of their own: the scope byte is shared).
	// Making one also needs the read scopes of what it delivers
	// (webhookReadScopes: links:read, and stats:read for link.clicked).
	{"GET", "/v1/webhooks", store.ScopeLinksRead},
	{"POST", "/v1/webhooks", store.ScopeLinksWrite},
	{"GET", "/v1/webhooks/*", store.ScopeLinksRead},
	{"DELETE", "/v1/webhooks/*", store.ScopeLinksWrite},
	{"GET", "/v1/webhooks/*/deliveries", store.ScopeLinksRead},
}

// requiredScopes returns the scopes of which a key needs one for method
// and path, and whether a row matched. HEAD reads as GET.
func requiredScopes(method, path string) (store.Scopes, bool) {
	if method == "HEAD" {
		method = "GET"
	}
	for _, row := range scopeTable {
		if (row.method == "*" || row.method == method) && matchPattern(row.pattern, path) {
			return row.scopes, true
		}
	}
	return 0, false
}

// hasScopeRow reports whether some row names path, whatever its method:
// such a path, served outside edge (the stats), is authenticated and
// scope-checked here before it is handed on.
func hasScopeRow(path string) bool {
	for _, row := range scopeTable {
		if matchPattern(row.pattern, path) {
			return true
		}
	}
	return false
}

// matchPattern matches path against a scopeTable pattern. Segments are
// compared whole; "*" takes one non-empty segment, a final "**" one or
// more.
func matchPattern(pattern, path string) bool {
	for {
		pseg, prest, pmore := strings.Cut(strings.TrimPrefix(pattern, "/"), "/")
		if pseg == "**" && !pmore {
			return len(path) > 1 && path[0] == '/'
		}
		if len(path) == 0 || path[0] != '/' {
			return false
		}
		seg, rest, more := strings.Cut(path[1:], "/")
		switch {
		case pseg == "*":
			if seg == "" {
				return false
			}
		case pseg != seg:
			return false
		}
		if !pmore || !more {
			return pmore == more
		}
		pattern, path = "/"+prest, "/"+rest
	}
}

// scopeDetail names the scopes a refused request needs.
func scopeDetail(need store.Scopes) string {
	names := need.Names()
	if len(names) == 1 {
		return "this API key lacks the scope " + names[0] + " that this request needs"
	}
	return "this API key lacks the scopes " + strings.Join(names, " or ") + ", one of which this request needs"
}

// requireScope wraps a handler served outside edge (Config.Routes) with
// authenticate, so its scope comes from scopeTable like every route's.
func (s *Server) requireScope(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if _, _, ok := s.authenticate(ctx); ok {
			h(ctx)
		}
	}
}
