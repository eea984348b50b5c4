package clickhouse

// migration8 holds the dirty marks of late events as ranges (DESIGN.md,
// "Dirty from a unit on"): a batch's late events of a site write one row
// (site, from_unit, until_unit = 0, version), dirty from that unit on,
// instead of a site_units row per unit; its late clicks one row (the key "",
// which no site is: clicks have no site, from_unit, until_unit, version)
// for the hours [from, until) instead of a link_units row per hour; all
// in one INSERT. A unit h is dirty under the highest version of the marks
// covering it; it is clean only when its marker (site_units, link_units)
// is clean with a version above that (siteUnits, linkUnits read both).
//
// Partitioned by tuple(): a batch's marks are one part, whatever the
// days of their late events (day partitions would make a part per day an
// INSERT touches, the cost markLate was built to avoid). Retention folds
// the marks before its cut into one per site at the cut, then deletes
// them (retention.go), so no mark's effect on a later unit is lost when
// the days go. Two marks with the same range collapse to the highest
// version, which dominates.
var migration8 = migration{8, "dirty marks as ranges", []string{
	`CREATE TABLE IF NOT EXISTS site_dirty (
    site String,
    from_unit DateTime,
    until_unit DateTime,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY tuple()
ORDER BY (site, from_unit, until_unit)`,
}}
