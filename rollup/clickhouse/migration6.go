package clickhouse

// migration6 holds the visits still open at a UTC midnight of a site
// (DESIGN.md, "Visits carried across days"): a run that ends at midnight
// D writes, with the rows of its units, one row per visit that an event
// at or after D could still join (its counters and its events so far,
// carriedVisit's encoding), under the run's version. The next day's run
// starts from them instead of reading the visit's events back to its
// start. They count only when their version is the marker's of the hour
// before D, as site rows do, so a run cut short is never read.
var migration6 = migration{6, "site visits carried across midnight", []string{
	`CREATE TABLE IF NOT EXISTS site_open_visits (
    site String,
    unit DateTime,
    visit UInt64,
    version UInt64,
    state String
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMMDD(unit)
ORDER BY (site, unit, visit)`,
}}
