// Package rollup is the aggregator: it receives sealed event segments from
// every node, applies each exactly once, keeps raw events by day, builds
// visits and hourly rollups (exact counters, visitor lists and HyperLogLog
// sketches), seals them into days and months, and answers the stats APIs:
// the native /v1 endpoints, the dashboard's, and Plausible's Stats API v2
// (POST /api/v2/query, with rollup/plausible).
//
// It is the one package edge and ingest never import: events reach it only
// as shipped segment files. DESIGN.md says why it is built the way it is.
//
// The metrics it computes are defined in rollup/query, with the Backend
// interface the HTTP layer (rollup/api) asks them through.
package rollup
