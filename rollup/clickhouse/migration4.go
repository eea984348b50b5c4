package clickhouse

// migration4 holds a site's pre-aggregated closed hours (DESIGN.md,
// "Site rows"). A unit is one UTC hour of one site: the visits that
// started in it and the bot events of it. Materializing a unit writes all
// its rows under one version and then its marker in site_units; a
// question reads the rows of the units whose marker is clean, matching
// (unit, version), so rows of a run that failed half-way, or of an older
// run whose keys vanished, are never counted.
//
// site_rows: one row per (unit, dimension, value, first hour f, last
// hour l) with the counters of the query rows; a question over [A, B)
// (whole hours) sums the rows with l >= A and f < B. visitors holds the
// visitor ids with an event in hour f (= l) under the value.
//
// site_rows is partitioned by month, not by day: a 30-day question then
// reads two or three partitions' parts, not thirty. Retention drops a
// month once all of it is past the raw days.
//
// site_units: the state of each unit, the highest version winning: 1
// clean (its rows are those of version), 0 dirty (a late segment touched
// it, or it was never materialized).
var migration4 = migration{4, "site rows of closed hours", []string{
	`CREATE TABLE IF NOT EXISTS site_rows (
    site String,
    dim String,
    value String,
    unit DateTime,
    f UInt32,
    l UInt32,
    version UInt64,
    visits Int64,
    sessions Int64,
    bounces Int64,
    visit_pv Int64,
    duration_s Int64,
    pageviews Int64,
    events Int64,
    engaged_ms Int64,
    eng_visits Int64,
    scroll_sum Int64,
    bots Int64,
    visitors Array(UInt64)
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(unit)
ORDER BY (site, dim, f, l, value, unit)`,
	`CREATE TABLE IF NOT EXISTS site_units (
    site String,
    unit DateTime,
    version UInt64,
    state UInt8
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMMDD(unit)
ORDER BY (site, unit)`,
}}
