// Package api serves the stats over HTTP: the native /v1 link and site
// endpoints, Plausible's Stats API v2 (POST /api/v2/query, parsed and
// checked by rollup/plausible), the owner's dashboard page, the stats
// exports (zips of CSV, export.go) and the reads of a shared dashboard's
// grant (share.go). It owns the
// requests and answers (arguments, API-key scoping, RFC 9457 problems,
// Plausible's error bodies) and knows storage only through
// query.Backend: the embedded aggregator (rollup) and any other backend
// answer through the same handlers.
package api
