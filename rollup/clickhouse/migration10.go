package clickhouse

// migration10 gives site rows their visitors as an encoded visitor set
// (linkset.go's format: up to 128 ids as a list, exact; more as an HLL
// sketch of precision 14), written in place of the id array, which stays
// empty: a question then merges sets in Go (siteread.go) instead of
// counting every visit id of its range in ClickHouse (DESIGN.md, "Site
// rows", "Visitor sets and the row cache"). It marks every site unit
// dirty under a version above its own, so rows written before it (ids, no
// set) are never read, and the materializer writes those units again,
// each day from the carried visits the day before's new run wrote.
var migration10 = migration{10, "site rows: visitor sets", []string{
	`ALTER TABLE site_rows ADD COLUMN visitor_set String`,
	`INSERT INTO site_units (site, unit, version, state) SELECT site, unit, max(version) + 1, toUInt8(0) FROM site_units GROUP BY site, unit`,
}}
