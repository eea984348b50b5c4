package raft

import (
	"errors"
	"time"

	"github.com/VictoriaMetrics/metrics"
	hraft "github.com/hashicorp/raft"

	"github.com/waymark/waymark/store"
)

// nodeMetrics are the waymark_raft_* series. GetOrCreate keeps a node that
// is closed and reopened on the same set from panicking on duplicates.
type nodeMetrics struct {
	applyDuration   *metrics.Histogram
	appliesOK       *metrics.Counter
	appliesRejected *metrics.Counter // the FSM refused the command (code taken, not found...)
	appliesNoLeader *metrics.Counter
	appliesUnknown  *metrics.Counter
	appliesFailed   *metrics.Counter

	state        *metrics.Gauge // 0 follower, 1 candidate, 2 leader, 3 shutdown
	appliedIndex *metrics.Gauge
	commitIndex  *metrics.Gauge
	lastIndex    *metrics.Gauge
	lastContact  *metrics.Gauge // seconds since the leader was last heard from

	blocksAllocated *metrics.Counter

	fsmBatchDuration *metrics.Histogram
	fsmCommands      *metrics.Counter
	fsmSkipped       *metrics.Counter // replayed entries and skippable unknown commands
	fsmUnknown       *metrics.Counter // unknown commands that were not skippable
	fsmHalted        *metrics.Gauge

	snapshotCreate  *metrics.Histogram
	snapshotPersist *metrics.Histogram
	snapshotRestore *metrics.Histogram
}

func newNodeMetrics(s *metrics.Set) *nodeMetrics {
	const p = "waymark_raft_"
	return &nodeMetrics{
		applyDuration:   s.GetOrCreateHistogram(p + "apply_duration_seconds"),
		appliesOK:       s.GetOrCreateCounter(p + `applies_total{result="ok"}`),
		appliesRejected: s.GetOrCreateCounter(p + `applies_total{result="rejected"}`),
		appliesNoLeader: s.GetOrCreateCounter(p + `applies_total{result="no_leader"}`),
		appliesUnknown:  s.GetOrCreateCounter(p + `applies_total{result="unknown_outcome"}`),
		appliesFailed:   s.GetOrCreateCounter(p + `applies_total{result="error"}`),

		state:        s.GetOrCreateGauge(p+"state", nil),
		appliedIndex: s.GetOrCreateGauge(p+"applied_index", nil),
		commitIndex:  s.GetOrCreateGauge(p+"commit_index", nil),
		lastIndex:    s.GetOrCreateGauge(p+"last_index", nil),
		lastContact:  s.GetOrCreateGauge(p+"last_contact_seconds", nil),

		blocksAllocated: s.GetOrCreateCounter(p + "blocks_allocated_total"),

		fsmBatchDuration: s.GetOrCreateHistogram(p + "fsm_batch_duration_seconds"),
		fsmCommands:      s.GetOrCreateCounter(p + "fsm_commands_total"),
		fsmSkipped:       s.GetOrCreateCounter(p + "fsm_skipped_total"),
		fsmUnknown:       s.GetOrCreateCounter(p + "fsm_unknown_commands_total"),
		fsmHalted:        s.GetOrCreateGauge(p+"fsm_halted", nil),

		snapshotCreate:  s.GetOrCreateHistogram(p + "snapshot_create_duration_seconds"),
		snapshotPersist: s.GetOrCreateHistogram(p + "snapshot_persist_duration_seconds"),
		snapshotRestore: s.GetOrCreateHistogram(p + "snapshot_restore_duration_seconds"),
	}
}

// countApply records one apply's latency and outcome.
func (m *nodeMetrics) countApply(start time.Time, err error) {
	m.applyDuration.UpdateDuration(start)
	switch {
	case err == nil:
		m.appliesOK.Inc()
	case errors.Is(err, store.ErrNoLeader):
		m.appliesNoLeader.Inc()
	case errors.Is(err, store.ErrUnknownOutcome):
		m.appliesUnknown.Inc()
	case isCommandError(err):
		m.appliesRejected.Inc()
	default:
		m.appliesFailed.Inc()
	}
}

// observe copies raft's view of itself into the gauges.
func (m *nodeMetrics) observe(r *hraft.Raft) {
	m.state.Set(float64(r.State()))
	m.appliedIndex.Set(float64(r.AppliedIndex()))
	m.commitIndex.Set(float64(r.CommitIndex()))
	m.lastIndex.Set(float64(r.LastIndex()))
	if r.State() == hraft.Leader {
		m.lastContact.Set(0)
	} else if lc := r.LastContact(); !lc.IsZero() {
		m.lastContact.Set(time.Since(lc).Seconds())
	}
}
