// Package clickhouse is the ClickHouse analytics backend: an HTTP client
// for ClickHouse (18.16 and current releases), the schema and its
// migrations, storing a shipped segment's events and drop tallies exactly
// once with its identity, and Backend, which answers every question of
// rollup/query.Backend from what is stored: link questions in SQL
// (uniqCombined visitors, exact counts), site questions from the raw
// events cut into visits at query time by the embedded store's rules
// (exact), Plausible v2 through rollup/plausible's engine. Closed hours
// are materialized into site and link rows (MaterializeOnce,
// MaterializeLoop, Rematerialize), so series and breakdowns read the raw
// events only after their horizon, with the same answers. Retention drops
// whole day partitions. DESIGN.md says what it does, why, what it costs
// and what is left.
//
// It depends on ingest, rollup/query, rollup/plausible, rollup/sources and
// store, never on package rollup (only its tests import it, to compare).
package clickhouse
