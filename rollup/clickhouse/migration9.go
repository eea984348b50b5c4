package clickhouse

// migration9 holds link day rows (DESIGN.md, "Link day rows"): per
// (code, dimension, value, UTC day) the day's clicks, bots, its visitor
// set merged from the 24 hour rows and that set's estimate, written once
// every hour of the day is clean; link_days marks a day's rows complete
// under the exact hour versions they were merged from. The version is
// in the sorting key, so rows of two runs of a day never collapse into
// each other: a question reads one run's rows, whole, or none. A row
// holds up to a dense sketch (16 KB), so a granule is 64 rows, not 8,192:
// a 30-day series reads its 30 rows, not every link's day rows.
var migration9 = migration{9, "link day rows", []string{
	`CREATE TABLE IF NOT EXISTS link_day_rows (
    code String,
    dim String,
    value String,
    day DateTime,
    version UInt64,
    clicks UInt64,
    bots UInt64,
    visitors UInt64,
    visitor_set String
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(day)
ORDER BY (code, dim, day, version, value)
SETTINGS index_granularity = 64`,
	`CREATE TABLE IF NOT EXISTS link_days (
    day DateTime,
    version UInt64,
    hours Array(UInt64)
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(day)
ORDER BY day`,
}}
