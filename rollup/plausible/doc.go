// Package plausible is the reference implementation of Plausible's Stats
// API v2 (POST /api/v2/query) over raw events. Parse decodes and validates a
// query body exactly as Plausible does and returns the executed Query
// (which the aggregator's rollup fast path also reads); Evaluate answers it
// exactly from the site's stored events, rebuilding visits the way
// Plausible's session cache builds them; (*Result).MarshalJSON writes
// Plausible's response. It imports nothing else from this module.
//
// Errors: a *QueryError (from Parse, or Evaluate for an invalid matches
// expression) and a *ScanLimitError (from Evaluate) are the client's; the
// HTTP layer answers 400 {"error": err.Error()}. Anything else is a server
// error. Evaluate is safe to call concurrently on one Query.
//
// The rules and the Plausible source file each comes from are in
// DESIGN.md. The reference is plausible/analytics at 997546fc (2026-01-07),
// Community Edition.
//
// # Done
//
//   - Request validation: the JSON schema (required keys, no unknown keys,
//     metric, dimension, filter, order_by, include and pagination shapes)
//     with ExJsonSchema's messages and paths, the parser's checks, and every
//     builder check in Plausible's order, with Plausible's exact text.
//   - Metrics: visitors, visits, pageviews, events, views_per_visit,
//     bounce_rate, visit_duration, time_on_page, scroll_depth, percentage,
//     conversion_rate, group_conversion_rate; integer or float as
//     Plausible's SQL types them, ClickHouse half-to-even rounding in its
//     operation order; the events or visits table chosen as
//     stats/table_decider.ex does; event:page with visit metrics by entry
//     page; bounce_rate restricted to the entry page under a top-level page
//     filter.
//   - Visits: 30 minutes from the last activity (engagement refreshes
//     included), engagement never starting one, first-event attributes,
//     first/last pageview as entry/exit page, bounce with "i": false; a
//     visit counts in every range it was active in (up to 7 days back) and
//     in the time bucket of its last event; visitors and visits smeared
//     over the hours they were active for time:hour.
//   - Dimensions: event:name (engagement included, as Plausible lists it),
//     event:page, event:hostname, event:goal, event:props:<key> with
//     "(none)", every visit:* dimension, time, time:hour, time:day,
//     time:week (first week clamped to the range), time:month; several at
//     once.
//   - Visitor detail, end to end from the edge: visit:region (ISO 3166-2
//     with the country prefix, "US-CA"; "" when unknown), visit:city (the
//     GeoNames id, an integer in results and filters; 0 when unknown),
//     visit:browser_version and visit:os_version ("major.minor", "(not
//     set)" when unknown), from Event.Region, City, BrowserVersion and
//     OSVersion, which the edge fills from its GeoIP city database and the
//     user agent; the rollups answer them too.
//   - Filters: is, is_not, contains, contains_not, matches, matches_not,
//     case_sensitive (ASCII lower() on the value, full downcase of the
//     clause, as Plausible), and, or, not, has_done, has_not_done,
//     "Direct / None" and "(not set)" as values, the contains special case
//     for empty sources, props with "(none)", goal filters (is/contains on
//     display names), event:hostname extended to entry/exit hostnames.
//   - date_range: day, Nd (7d, 28d, 30d, 91d... ending yesterday), month,
//     Nmo (6mo, 12mo... ending last month), year, all, dates and datetimes,
//     in the site timezone with Elixir's DST gap/overlap choices;
//     include.trim_relative_date_range.
//   - include.total_rows, include.time_labels, include.imports (always
//     no_imported_data), order_by with defaults and "time", pagination,
//     the query echo.
//   - Goals: event goals (with custom props) and page goals whose "*" and
//     "**" both match across "/"; display names defaulted as Plausible.
//
// # Partial
//
//   - visit:source and visit:channel are as good as Config.Source and
//     Config.Channel (the defaults are stand-ins without a referrer
//     database); visit:referrer is the referrer host without "www."
//     (Plausible adds the path).
//   - visit:country_name, visit:region_name, visit:city_name come from
//     Config.LocationName, else are empty.
//   - visit:os_version is "(not set)" on every event Waymark's edge
//     captures today: its user-agent parser reports no OS version.
//     visit:region and visit:city need a city database in MaxMind's layout
//     at the edge (make geoip); with a country database they stay empty.
//   - visit:screen is visit:device. visit:entry_page_hostname and
//     visit:exit_page_hostname work as dimensions (Plausible errors).
//   - Counts are exact; Plausible's uniq() is approximate on large sets.
//   - A matches filter with an invalid expression, a malformed JSON body and
//     more than 1 000 000 time labels get Waymark's own 400 messages.
//
// # Missing
//
//   - Scroll goals (page goals with a scroll threshold), and the null
//     events metric they give.
//   - Revenue metrics (Enterprise only; refused by the schema, as in CE),
//     saved segments (a segment filter fails as a missing segment), imported
//     stats, sampling, the legacy time_on_page of ranges before 2000,
//     metric_warnings, the native_stats_start_at clamp, the custom props
//     plan check.
//
// # Choices where Plausible has quirks
//
//   - event:name with is_not, contains, contains_not, matches or
//     matches_not works as on any other dimension; Plausible's SQL builder
//     handles only is and matches nothing otherwise.
//   - Replicated: events-table visitors and visits include engagement
//     events; a visit counts in every range it overlaps and in the bucket of
//     its last event (rows outside the range can appear); half-to-even
//     rounding; "*" = "**" = ".*" and "|" as alternation in goal paths; the
//     session gap measured from the last activity; hashes kept across the
//     salt rotation (the store already does this).
//   - Exact counts instead of uniq() and sampling.
//   - Filter trees are evaluated as written: Plausible's SQL turns the
//     other table's leaves into true inside or/not, which makes a not over
//     an event filter match no visit at all; has_done filters are not
//     renamed to entry pages; a row only one side of an hourly FULL JOIN
//     has keeps its dimension values; ties in order_by are broken by the
//     dimension values, ascending.
//
// # Scan window
//
// Evaluate scans the range plus an hour on each side and widens it,
// doubling, only for visitors whose events run up to a scan edge while
// touching the range (see scan.go): back at most 7 days and 30 minutes,
// forward at most to 30 minutes after Query.Now. A visit still running 7
// days before the range is left out as Plausible leaves it out; its
// events in the range count with the attributes of its first scanned event.
package plausible
