package clickhouse

import (
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
)

// clientMetrics are the waymark_clickhouse_* series. GetOrCreate lets
// clients share a set.
type clientMetrics struct {
	requests       *metrics.Counter
	requestErrors  *metrics.Counter // the server's error or no answer
	queriesKilled  *metrics.Counter // KILL QUERY sent for an ended context
	segStored      *metrics.Counter
	segDuplicate   *metrics.Counter
	segConflict    *metrics.Counter
	segMalformed   *metrics.Counter // does not verify: never stored
	segFailed      *metrics.Counter // not stored: the caller retries
	eventsInserted *metrics.Counter // rows sent, a retry's again
	insertDuration *metrics.Histogram
	// The Backend's: raw events site questions read, questions refused
	// as too big, retention's days dropped and failed runs.
	siteEventsRead   *metrics.Counter
	questionsRefused *metrics.Counter
	daysDropped      *metrics.Counter
	retentionFailed  *metrics.Counter
	// Site rows: units written, marked dirty by late segments, runs
	// failed; site questions answered from rows (the open part from raw
	// events) and entirely from raw events.
	unitsMaterialized *metrics.Counter
	unitsPending      atomic.Int64     // ready site units the last pass left
	passes            *metrics.Counter // materializer passes (not rebuilds)
	unitsDirtied      *metrics.Counter // ready units a late batch's marks covered
	settleWaits       *metrics.Counter // passes a site or the link hours waited for marks to settle (settle.go)
	dirtyMarks        *metrics.Counter // site_dirty rows written (one per site of a late batch)
	dirtyFolded       *metrics.Counter // sites whose marks retention folded into one at the cut
	materializeFailed *metrics.Counter
	siteFast          *metrics.Counter
	siteRaw           *metrics.Counter
	visitsCarried     *metrics.Counter // visits written open at a midnight (carried.go)
	siteDaysWritten   *metrics.Counter // whole clean days written as day rows (sitedays.go)
	siteDayFills      *metrics.Counter // background reads of stored day rows into the cache
	siteDayFillFailed *metrics.Counter
	// Link rows: hours written; link series and breakdowns answered
	// with rows (the open part from raw events) and from raw events only.
	linkHoursMaterialized *metrics.Counter
	linkFast              *metrics.Counter
	linkRaw               *metrics.Counter
	linkCache             rowCacheMetrics // linkcache.go
	// Link day rows (linkdays.go): days written, days questions took
	// from day rows, and plans that could not read the day markers (then
	// answered from hour rows).
	linkDaysMaterialized *metrics.Counter
	linkDaysRead         *metrics.Counter
	linkDayMarkersFailed *metrics.Counter
	siteCache            rowCacheMetrics // sitecache.go
	markerCache          rowCacheMetrics // markercache.go
}

func newClientMetrics(s *metrics.Set) *clientMetrics {
	if s == nil {
		s = metrics.NewSet()
	}
	const p = "waymark_clickhouse_"
	m := &clientMetrics{
		requests:       s.GetOrCreateCounter(p + "requests_total"),
		requestErrors:  s.GetOrCreateCounter(p + "request_errors_total"),
		queriesKilled:  s.GetOrCreateCounter(p + "queries_killed_total"),
		segStored:      s.GetOrCreateCounter(p + `segments_total{outcome="stored"}`),
		segDuplicate:   s.GetOrCreateCounter(p + `segments_total{outcome="duplicate"}`),
		segConflict:    s.GetOrCreateCounter(p + `segments_total{outcome="conflict"}`),
		segMalformed:   s.GetOrCreateCounter(p + `segments_total{outcome="malformed"}`),
		segFailed:      s.GetOrCreateCounter(p + `segments_total{outcome="error"}`),
		eventsInserted: s.GetOrCreateCounter(p + "events_inserted_total"),
		insertDuration: s.GetOrCreateHistogram(p + "segment_insert_duration_seconds"),

		siteEventsRead:   s.GetOrCreateCounter(p + "site_events_read_total"),
		questionsRefused: s.GetOrCreateCounter(p + "questions_refused_total"),
		daysDropped:      s.GetOrCreateCounter(p + "retention_days_dropped_total"),
		retentionFailed:  s.GetOrCreateCounter(p + "retention_failed_total"),

		unitsMaterialized: s.GetOrCreateCounter(p + "site_units_materialized_total"),
		passes:            s.GetOrCreateCounter(p + "materialize_passes_total"),
		unitsDirtied:      s.GetOrCreateCounter(p + "site_units_dirtied_total"),
		dirtyMarks:        s.GetOrCreateCounter(p + "site_dirty_marks_total"),
		settleWaits:       s.GetOrCreateCounter(p + "materialize_settle_waits_total"),
		dirtyFolded:       s.GetOrCreateCounter(p + "site_dirty_folded_total"),
		materializeFailed: s.GetOrCreateCounter(p + "materialize_failed_total"),
		siteFast:          s.GetOrCreateCounter(p + `site_questions_total{path="rows"}`),
		siteRaw:           s.GetOrCreateCounter(p + `site_questions_total{path="raw"}`),
		visitsCarried:     s.GetOrCreateCounter(p + "site_visits_carried_total"),
		siteDaysWritten:   s.GetOrCreateCounter(p + "site_days_written_total"),
		siteDayFills:      s.GetOrCreateCounter(p + "site_day_fills_total"),
		siteDayFillFailed: s.GetOrCreateCounter(p + "site_day_fills_failed_total"),

		linkHoursMaterialized: s.GetOrCreateCounter(p + "link_hours_materialized_total"),
		linkFast:              s.GetOrCreateCounter(p + `link_questions_total{path="rows"}`),
		linkRaw:               s.GetOrCreateCounter(p + `link_questions_total{path="raw"}`),
		linkCache:             newRowCacheMetrics(s, p, "link_row_cache"),
		linkDaysMaterialized:  s.GetOrCreateCounter(p + "link_days_materialized_total"),
		linkDaysRead:          s.GetOrCreateCounter(p + "link_days_read_total"),
		linkDayMarkersFailed:  s.GetOrCreateCounter(p + "link_day_markers_failed_total"),
		siteCache:             newRowCacheMetrics(s, p, "site_row_cache"),
		markerCache:           newRowCacheMetrics(s, p, "marker_cache"),
	}
	s.GetOrCreateGauge(p+"site_units_pending", func() float64 { return float64(m.unitsPending.Load()) })
	return m
}
