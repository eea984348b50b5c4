package query

import (
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/plausible"
	"github.com/waymark/waymark/store"
)

// Backend answers every question the stats APIs (rollup/api) ask of
// stored analytics: the native /v1 link and site endpoints, the
// dashboard's reads (which are those endpoints) and Plausible's Stats API
// v2. The embedded aggregator (*rollup.Aggregator, Pebble) implements it;
// a ClickHouse backend is to implement it too. It is for queries only:
// nothing on the path of an event goes through it.
//
// The contract every implementation keeps, and the tests compare against
// values worked out by hand:
//
//   - Exact and estimated. Counts (clicks, pageviews, events, visits,
//     bot counts, dropped events) are exact. Visitor numbers (visitors,
//     unique_visitors, goal visitors and conversion rates) may be
//     estimates; an answer that can hold one names those fields in its
//     Estimated list, and an answer counted exactly (from raw events)
//     says so with an empty list. The embedded store is exact up to 128
//     visitors a set and then within 0.81 % standard error (HyperLogLog,
//     p = 14); another backend states its own bound.
//   - Ranges. A Range is half-open, [From, To). Rollups are hourly, so a
//     range is read at whole UTC hours (From rounded down, To up); a part
//     older than a retention tier is read from the next coarser tier and
//     the answer says so where it has a field for it (Coarse, Clipped).
//     A range that is empty or longer than ten years is refused
//     (CheckRange).
//   - Time zones. Series buckets, "today" and the weekday-hour grid are in
//     the zone the caller gives (Range.Loc, or loc); a zone whose offset is
//     not a whole number of hours has its boundaries moved to the UTC hour
//     before. Instants in answers are the bucket starts in that zone.
//   - Visits. A range counts every visit it overlaps (rollup/DESIGN.md,
//     "The numbers Plausible users expect"); the package doc defines
//     every metric.
//   - Freshness. Every answer includes every event the backend has
//     acknowledged to an edge before the call.
//   - Errors. A question the backend cannot answer (an unknown dimension,
//     granularity or operator, a raw query over too many events) is
//     ErrUnsupportedQuery (the API's 400); after Close, ErrClosed (503);
//     Plausible's own query errors (*plausible.QueryError,
//     *plausible.ScanLimitError) pass through as they are.
//
// Link codes and site ids are the caller's; it has checked that the asker
// owns them. Safe for concurrent use.
type Backend interface {
	// LinkStats is a link's totals over r and its series by g (buckets
	// clipped to r): clicks exact, unique visitors estimated.
	LinkStats(code string, r Range, g Granularity) (*LinkStats, error)
	// LinkBreakdown is the top limit values of a link dimension (country,
	// device, browser, os, referrer, utm_source, utm_medium,
	// utm_campaign) by clicks over r, with the clicks of the rest.
	LinkBreakdown(code, dimension string, r Range, limit int) (*LinkBreakdown, error)
	// LinkRealtime counts the link's non-bot clicks of the last minute,
	// five minutes and hour, from the raw events, and lists the newest n
	// (1 to 100; 20 otherwise).
	LinkRealtime(code string, n int) (*LinkRealtime, error)
	// LinkOverview is a link's overview at the backend's now, with days
	// in loc.
	LinkOverview(code string, loc *time.Location) (*LinkOverview, error)

	// SiteAggregate is a site's metrics over r, narrowed by filters
	// (combined with AND). Filters on more than one dimension
	// (NeedsRaw) are counted exactly from the raw events, visitors too.
	SiteAggregate(site string, r Range, filters []DimFilter) (SiteMetrics, error)
	// SiteTimeseries is the site's metrics per bucket of g over r, every
	// bucket present (zero when empty), the first and last clipped to r.
	SiteTimeseries(site string, r Range, g Granularity, filters []DimFilter) ([]SitePoint, error)
	// SiteBreakdown is the top limit values of a site dimension
	// (SiteDimensions) over r by its primary count (pageviews for page,
	// events for event, visits otherwise). Filters on another dimension
	// are answered from the raw events (FromRawEvents).
	SiteBreakdown(site, dimension string, r Range, limit int, filters []DimFilter) (*SiteBreakdown, error)
	// SiteRealtime is the site's current visitors (exact: distinct
	// visitors with a non-bot event in the last 5 minutes) and recent
	// pageviews, from the raw events.
	SiteRealtime(site string) (*SiteRealtime, error)
	// SiteHeatmap adds a site's hours over r up by weekday and hour of
	// the day in r's zone (Plausible's time:hour numbers).
	SiteHeatmap(site string, r Range) (*Heatmap, error)
	// SiteGoalStats is the conversions of each of the site's goals over r.
	SiteGoalStats(site string, goals []store.Goal, r Range) (*SiteGoals, error)

	// SiteStatsStart is the start (UTC midnight) of the oldest held day
	// with events of the site, the zero time without any: Plausible's
	// stats_start, which a v2 query's "all" range begins at.
	SiteStatsStart(site string) (time.Time, error)
	// QueryV2 answers a parsed Plausible Stats API v2 query on site: the
	// rows, with Estimated naming the metrics that are estimates. Its
	// DroppedEvents is left for the caller (DroppedEvents).
	QueryV2(site string, q *plausible.Query) (*plausible.Result, error)

	// DroppedEvents is how many events of one link or site (by scope)
	// the edges dropped before writing them, in the UTC hours r touches:
	// the answers over r are short by up to that much, never by more.
	DroppedEvents(scope ingest.Scope, name string, r Range) (int64, error)
}
