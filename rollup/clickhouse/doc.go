// Package clickhouse is the ClickHouse analytics backend's foundation: an
// HTTP client for ClickHouse (18.16 and current releases), the schema
// and its migrations, storing a shipped segment's events exactly once
// with its identity, and the first queries (a site's and a link's daily
// series and totals). It is not wired into the node yet; DESIGN.md says
// what it does, why, and what is left.
//
// It depends on ingest's segment and event types only, never on package
// rollup, which will select it behind its backend interface.
package clickhouse
