// Package rollup is the aggregator: it receives sealed event segments from
// every node, applies each exactly once, keeps raw events by day, builds
// visits and hourly rollups (exact counters, visitor lists and HyperLogLog
// sketches), seals them into days and months, and answers the stats
// questions of query.Backend from them: the embedded (Pebble) backend that
// rollup/api serves the native /v1 endpoints, the dashboard's and
// Plausible's Stats API v2 from.
//
// StoreHandler is the same receiving endpoint for an aggregator whose
// events go to an external store (ClickHouse), which any number of
// aggregators share.
//
// It is the one package edge and ingest never import: events reach it only
// as shipped segment files. DESIGN.md says why it is built the way it is.
//
// The metrics it computes are defined in rollup/query, with the Backend
// interface; DESIGN.md ("Layout") says which package owns what.
package rollup
