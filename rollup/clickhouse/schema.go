package clickhouse

// The schema, as numbered migrations. Every statement is idempotent on
// its own (IF NOT EXISTS), so a migration cut short by a crash, or run by
// two aggregators at once, is simply run again. Only SQL that ClickHouse
// 18.16 and current releases both accept: no TTL (19.6), no
// LowCardinality (experimental before 19.x), no DateTime64 (20.1), no
// query parameters (19.x).
type migration struct {
	version    uint32
	name       string
	statements []string
}

// eventsColumns are the raw events table's columns in RowBinary order
// (rowbinary.go writes them in this order).
const eventsColumns = `
    time DateTime,
    ms UInt16,
    kind UInt8,
    flags UInt8,
    id FixedString(16),
    visitor UInt64,
    prev_visitor UInt64,
    code String,
    site String,
    name String,
    node String,
    region String,
    path String,
    referrer String,
    utm_source String,
    utm_medium String,
    utm_campaign String,
    utm_term String,
    utm_content String,
    country String,
    subdivision String,
    city String,
    device String,
    browser String,
    browser_version String,
    os String,
    os_version String,
    engaged_ms UInt64,
    scroll_depth UInt8,
    prop_keys Array(String),
    prop_values Array(String),
    seg_node String,
    seg_inc UInt64,
    seg_seq UInt64,
    seg_rec UInt32`

// migrations in order; a released one is never changed, only followed.
var migrations = []migration{
	{1, "raw events and segment identities", []string{
		// One row per event. A day per partition, so retention drops
		// partitions. Sorted by site, then link, then time: a site's or a
		// link's range is one key range per day (clicks have no site,
		// site events no code). The segment identity and record number
		// end the key, so the same record stored twice (a retried insert)
		// is one key, which ReplacingMergeTree collapses in merges and
		// FINAL collapses at query time.
		`CREATE TABLE IF NOT EXISTS events (` + eventsColumns + `
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMMDD(time)
ORDER BY (site, code, time, seg_node, seg_inc, seg_seq, seg_rec)`,
		// One row per stored segment, written after all its events: the
		// S record of the embedded store. Rows of one identity are equal
		// (a conflicting segment is never recorded), so duplicates from
		// a retry collapse.
		`CREATE TABLE IF NOT EXISTS segments (
    node String,
    inc UInt64,
    seq UInt64,
    bytes UInt32,
    crc UInt32,
    events UInt32,
    first_time DateTime,
    last_time DateTime,
    stored DateTime
) ENGINE = ReplacingMergeTree()
PARTITION BY tuple()
ORDER BY (node, inc, seq)`,
	}},
	migration2,
	{3, "drop tallies and retired link clicks", []string{
		// A segment's drop tallies (ingest.DropTally), written with its
		// events, before its identity; keyed by the segment identity and
		// the tally's place in it, so a retried segment's second copy
		// collapses as its events do. A day per partition, dropped with
		// the events' days.
		`CREATE TABLE IF NOT EXISTS drop_tallies (
    scope UInt8,
    name String,
    hour DateTime,
    count UInt64,
    seg_node String,
    seg_inc UInt64,
    seg_seq UInt64,
    seg_rec UInt32
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMMDD(hour)
ORDER BY (scope, name, hour, seg_node, seg_inc, seg_seq, seg_rec)`,
		// Each link's non-bot clicks of a raw day that retention dropped,
		// written just before the drop: all-time clicks (the click limit's
		// counter) outlive the raw days. Keyed by (code, day), so a
		// retention run cut short and run again collapses onto itself.
		`CREATE TABLE IF NOT EXISTS retired_clicks (
    code String,
    day UInt32,
    clicks UInt64
) ENGINE = ReplacingMergeTree()
PARTITION BY tuple()
ORDER BY (code, day)`,
	}},
	migration4,
	migration5,
	migration6,
	migration7,
	migration8,
	migration9,
	migration10,
}

// migrationsTable records every applied migration (version once; a
// second row from a concurrent migrator collapses).
const migrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
    version UInt32,
    name String,
    applied DateTime
) ENGINE = ReplacingMergeTree()
PARTITION BY tuple()
ORDER BY version`
