package rollup

import "github.com/VictoriaMetrics/metrics"

// receiverMetrics are the waymark_rollup_* series. GetOrCreate lets an
// aggregator be closed and reopened on the same set.
type receiverMetrics struct {
	requestsOK           *metrics.Counter
	requestsUnauthorized *metrics.Counter
	requestsBad          *metrics.Counter // body that does not decode as a batch
	requestsFailed       *metrics.Counter // storage error: nothing acked
	bodyBytes            *metrics.Counter

	segmentsReceived  *metrics.Counter
	segmentsApplied   *metrics.Counter
	segmentsDuplicate *metrics.Counter
	segmentsRejected  *metrics.Counter // damaged: not stored, not acked
	segmentsConflict  *metrics.Counter // identity already used for other bytes: refused

	eventsStored  *metrics.Counter
	eventsExpired *metrics.Counter // older than retention on arrival
	eventsFuture  *metrics.Counter // further ahead of our clock than futureSlack

	applyDuration *metrics.Histogram

	pendingEvents      *metrics.Gauge // folded, rollups not written yet
	checkpoints        *metrics.Counter
	checkpointsFailed  *metrics.Counter
	checkpointDuration *metrics.Histogram
	journalReplayed    *metrics.Counter // segments folded again from the journal

	activeVisitors   *metrics.Gauge // visitor states held in memory
	rawDays          *metrics.Gauge
	rawEvents        *metrics.Gauge
	rawBytes         *metrics.Gauge // keys and values of held events
	diskBytes        *metrics.Gauge // the whole database on disk
	daysDropped      *metrics.Counter
	retentionFailed  *metrics.Counter
	retentionSeconds *metrics.Histogram
}

func newReceiverMetrics(s *metrics.Set) *receiverMetrics {
	const p = "waymark_rollup_"
	return &receiverMetrics{
		requestsOK:           s.GetOrCreateCounter(p + `segment_requests_total{result="ok"}`),
		requestsUnauthorized: s.GetOrCreateCounter(p + `segment_requests_total{result="unauthorized"}`),
		requestsBad:          s.GetOrCreateCounter(p + `segment_requests_total{result="bad_request"}`),
		requestsFailed:       s.GetOrCreateCounter(p + `segment_requests_total{result="error"}`),
		bodyBytes:            s.GetOrCreateCounter(p + "segment_request_bytes_total"),

		segmentsReceived:  s.GetOrCreateCounter(p + "segments_received_total"),
		segmentsApplied:   s.GetOrCreateCounter(p + "segments_applied_total"),
		segmentsDuplicate: s.GetOrCreateCounter(p + "segments_duplicate_total"),
		segmentsRejected:  s.GetOrCreateCounter(p + `segments_rejected_total{reason="malformed"}`),
		segmentsConflict:  s.GetOrCreateCounter(p + `segments_rejected_total{reason="conflict"}`),

		eventsStored:  s.GetOrCreateCounter(p + "events_stored_total"),
		eventsExpired: s.GetOrCreateCounter(p + `events_dropped_total{reason="expired"}`),
		eventsFuture:  s.GetOrCreateCounter(p + `events_dropped_total{reason="future"}`),

		applyDuration: s.GetOrCreateHistogram(p + "batch_apply_duration_seconds"),

		pendingEvents:      s.GetOrCreateGauge(p+"pending_events", nil),
		checkpoints:        s.GetOrCreateCounter(p + `checkpoints_total{result="ok"}`),
		checkpointsFailed:  s.GetOrCreateCounter(p + `checkpoints_total{result="error"}`),
		checkpointDuration: s.GetOrCreateHistogram(p + "checkpoint_duration_seconds"),
		journalReplayed:    s.GetOrCreateCounter(p + "journal_segments_refolded_total"),

		activeVisitors:   s.GetOrCreateGauge(p+"active_visitors", nil),
		rawDays:          s.GetOrCreateGauge(p+"raw_days", nil),
		rawEvents:        s.GetOrCreateGauge(p+"raw_events", nil),
		rawBytes:         s.GetOrCreateGauge(p+"raw_bytes", nil),
		diskBytes:        s.GetOrCreateGauge(p+"disk_bytes", nil),
		daysDropped:      s.GetOrCreateCounter(p + "retention_days_dropped_total"),
		retentionFailed:  s.GetOrCreateCounter(p + "retention_failures_total"),
		retentionSeconds: s.GetOrCreateHistogram(p + "retention_duration_seconds"),
	}
}
