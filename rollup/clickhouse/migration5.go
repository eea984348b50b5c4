package clickhouse

// migration5 holds links' closed hours (DESIGN.md, "Link rows"): per
// (code, dimension, value, hour) the non-bot and bot clicks and the
// distinct non-bot visitors (their ids: a uniqCombined state of 18.16
// costs several times the bytes of the ids of an hour, and merging 720 of
// them was slower than the raw scan), written by INSERT ... SELECT from
// the events; link_units marks each hour (all links at once) clean under the
// version its rows carry, or dirty. As site rows, a question reads the
// rows of clean hours of their version only.
var migration5 = migration{5, "link rows of closed hours", []string{
	`CREATE TABLE IF NOT EXISTS link_rows (
    code String,
    dim String,
    value String,
    hour DateTime,
    version UInt64,
    clicks UInt64,
    bots UInt64,
    visitors Array(UInt64)
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(hour)
ORDER BY (code, dim, hour, value)`,
	`CREATE TABLE IF NOT EXISTS link_units (
    hour DateTime,
    version UInt64,
    state UInt8
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMMDD(hour)
ORDER BY hour`,
}}
