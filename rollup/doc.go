// Package rollup is the aggregator: it receives sealed event segments from
// every node, keeps raw events by day, deduplicates, builds visits and
// rollups (HyperLogLog unique visitors) and answers the stats API.
//
// It is the one package edge and ingest never import: events reach it only
// as shipped segment files.
package rollup
