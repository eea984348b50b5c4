package clickhouse

// migration8 holds per-site "dirty from" marks (DESIGN.md, "Dirty from
// a unit on"): a batch's late events of a site write one row (site,
// from_unit, version) instead of a site_units row per unit from the late
// event's hour on. A unit h of the site is dirty under max(version :
// from_unit <= h); it is clean only when its site_units marker is clean
// with a version above that (siteUnits reads both).
//
// Partitioned by tuple(): a batch's marks of every site are one part,
// whatever the days of their late events (day partitions would make a
// part per day an INSERT touches, the cost markLate was built to avoid).
// Retention folds each site's marks before its cut into one mark at the
// cut, then deletes them (retention.go), so no mark's effect on a later
// unit is lost when the days go. Two marks with the same from collapse to
// the highest version, which dominates.
var migration8 = migration{8, "site dirty-from marks", []string{
	`CREATE TABLE IF NOT EXISTS site_dirty (
    site String,
    from_unit DateTime,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY tuple()
ORDER BY (site, from_unit)`,
}}
