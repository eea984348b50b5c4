package edge

import (
	"fmt"

	"github.com/VictoriaMetrics/metrics"
)

// serverMetrics holds the counters the hot path touches, resolved once so a
// redirect only does an atomic add.
type serverMetrics struct {
	set *metrics.Set

	redirectHit    *metrics.Counter // 3xx from the cache
	redirectMiss   *metrics.Counter // 3xx after a Pebble read
	notFound       *metrics.Counter
	unknownHost    *metrics.Counter // a Host that is neither the public host nor an approved custom domain
	gone           *metrics.Counter
	legalBlock     *metrics.Counter
	blocked        *metrics.Counter
	review         *metrics.Counter
	blocklisted    *metrics.Counter // destination on the replicated blocklist
	redirectErrors *metrics.Counter

	cacheHits   *metrics.Counter
	cacheMisses *metrics.Counter

	remoteLookups, remoteHits, remoteErrors *metrics.Counter

	rateLimited  *metrics.Counter
	authFailures *metrics.Counter
	// scopeRefusals counts valid keys refused for a missing scope (403).
	scopeRefusals *metrics.Counter
	bodyTooLarge  *metrics.Counter

	exports, exportsFailed            *metrics.Counter // GET /v1/links/export
	bulkItemsCreated, bulkItemsFailed *metrics.Counter // POST /v1/links/bulk

	// Issue 13.4: links with a preview answered to a crawler (the page)
	// and to anyone else (the redirect).
	previewPages, previewRedirects *metrics.Counter
}

func newServerMetrics(set *metrics.Set, c *cache) *serverMetrics {
	result := func(r string) *metrics.Counter {
		return set.GetOrCreateCounter(`waymark_redirects_total{result="` + r + `"}`)
	}
	m := &serverMetrics{
		set:            set,
		redirectHit:    result("hit"),
		redirectMiss:   result("miss"),
		notFound:       result("not_found"),
		unknownHost:    result("unknown_host"),
		gone:           result("gone"),
		legalBlock:     result("legal_block"),
		blocked:        result("blocked"),
		review:         result("review"),
		blocklisted:    result("blocklisted"),
		redirectErrors: result("error"),
		cacheHits:      set.GetOrCreateCounter("waymark_edge_cache_hits_total"),
		cacheMisses:    set.GetOrCreateCounter("waymark_edge_cache_misses_total"),
		remoteLookups:  set.GetOrCreateCounter("waymark_edge_remote_lookups_total"),
		remoteHits:     set.GetOrCreateCounter("waymark_edge_remote_lookup_hits_total"),
		remoteErrors:   set.GetOrCreateCounter("waymark_edge_remote_lookup_errors_total"),
		rateLimited:    set.GetOrCreateCounter("waymark_api_rate_limited_total"),
		authFailures:   set.GetOrCreateCounter("waymark_api_auth_failures_total"),
		scopeRefusals:  set.GetOrCreateCounter("waymark_api_scope_refusals_total"),
		bodyTooLarge:   set.GetOrCreateCounter("waymark_http_body_too_large_total"),

		exports:          set.GetOrCreateCounter("waymark_api_exports_total"),
		exportsFailed:    set.GetOrCreateCounter("waymark_api_exports_failed_total"),
		bulkItemsCreated: set.GetOrCreateCounter(`waymark_api_bulk_items_total{result="created"}`),
		bulkItemsFailed:  set.GetOrCreateCounter(`waymark_api_bulk_items_total{result="failed"}`),

		previewPages:     set.GetOrCreateCounter(`waymark_preview_answers_total{answer="page"}`),
		previewRedirects: set.GetOrCreateCounter(`waymark_preview_answers_total{answer="redirect"}`),
	}
	if c != nil {
		set.GetOrCreateGauge("waymark_edge_cache_entries", func() float64 { return float64(c.len()) })
	}
	return m
}

// apiRequest counts one API answer by route and status.
func (m *serverMetrics) apiRequest(route string, status int) {
	m.set.GetOrCreateCounter(fmt.Sprintf(`waymark_api_requests_total{route=%q,status="%d"}`, route, status)).Inc()
}

// countKind counts a redirect-path answer that is not a 3xx.
func (m *serverMetrics) countKind(k entryKind) {
	switch k {
	case kindNotFound:
		m.notFound.Inc()
	case kindGone:
		m.gone.Inc()
	case kindLegal:
		m.legalBlock.Inc()
	case kindBlocked:
		m.blocked.Inc()
	case kindReview:
		m.review.Inc()
	}
}
