package clickhouse

// migration7 gives link rows their visitors as an encoded visitor set
// (linkset.go: a list, or an HLL sketch of precision 14) in place of the
// id array, and marks every link hour dirty under a version above its
// own: rows written before it (no set) are then never read, and the
// materializer rewrites those hours with sets (DESIGN.md, "Link rows").
var migration7 = migration{7, "link rows: visitor sets", []string{
	`ALTER TABLE link_rows ADD COLUMN visitor_set String`,
	`INSERT INTO link_units (hour, version, state) SELECT hour, max(version) + 1, toUInt8(0) FROM link_units GROUP BY hour`,
}}
