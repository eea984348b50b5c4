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
//
// site_days: a whole clean day's rows of every dimension merged
// (sitedays.go), under a hash of the day's 24 unit versions, and a mark
// row (dim "\x00day") written in the same INSERT. By month, as site_rows.
// Granules of 1,024 rows, not 8,192: a question reads one dimension, and
// a granule shared with a busy dimension's sets (pages) costs the whole
// granule's visitor_set column.
var migration10 = migration{10, "site rows: visitor sets and day rows", []string{
	`ALTER TABLE site_rows ADD COLUMN visitor_set String`,
	`CREATE TABLE IF NOT EXISTS site_days (
    site String,
    dim String,
    value String,
    day DateTime,
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
    visitor_set String
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(day)
ORDER BY (site, dim, day, version, value, f, l)
SETTINGS index_granularity = 1024`,
	`INSERT INTO site_units (site, unit, version, state) SELECT site, unit, max(version) + 1, toUInt8(0) FROM site_units GROUP BY site, unit`,
}}
