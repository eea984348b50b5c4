// Package edge owns Waymark's public fasthttp server: the redirect hot path
// and its in-process cache, the link and site API handlers with their
// validation, RFC 9457 problem responses, and the small HTML pages shown
// instead of a redirect (not found, gone, legal block, warning, review
// interstitial).
//
// The flows through this package:
//
//	redirect: fasthttp -> cache -> store.GetLink (Pebble) -> 3xx -> OnRedirect
//	gated:    cache entry with a password -> form page; with a preview -> crawler? page : 3xx (password.go, preview.go)
//	unlock:   POST /{code} -> attempt limits -> argon2id slot -> verify -> 3xx (by the rules, if any) -> OnRedirect (password.go)
//	rules:    ... cache entry with rules -> first matching rule (Classifier: device, OS, browser, country) -> 3xx -> OnRuleRedirect
//	create:   fasthttp -> auth -> rate limit -> decode + validate -> idempotency check -> Writer.CreateLink (Raft) -> 201
//	edit:     fasthttp -> auth -> rate limit -> store.GetLink (ownership) -> Writer.UpdateLink (Raft) -> 200
//	site:     fasthttp -> auth -> rate limit -> decode + validate -> Writer.UpdateSite (Raft; the FSM checks ownership) -> 200/201/204
//	apply:    FSM commits to Pebble -> OnChange -> Server.Invalidate -> next request reads Pebble again
//	share:    /share/{token} -> ParseShareToken -> store.ShareByHash (Pebble) -> target and cookie checks -> ShareConfig.Page | ShareConfig.Stats
//
// The redirect never leaves the node: no network, no Raft, no waiting. A
// cache hit copies pre-built bytes into the response and allocates nothing.
// Expiry is checked against the clock on every request, so a link expires
// the moment it passes even when its redirect is cached.
//
// Redirect rules (rules.go, rulematch.go) are parsed once into the cache
// entry; a link without rules pays one nil check, a link with them asks
// the classifier only for what its rules test and still allocates
// nothing.
//
// Answers for a code that does not redirect: unknown 404, expired, disabled
// or click-limited 410, legal_block 451, blocked 410 (a warning page that
// names the destination host without linking to it), review 200 (an
// interstitial with a continue button). A password-protected link answers
// a form page without its destination; a link with a social preview
// answers link unfurlers (crawlers.go) a page of Open Graph tags.
package edge
