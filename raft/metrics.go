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
	pipelinesUnstuck *metrics.Counter // append pipelines the watchdog closed (pipeline.go)
	applyDuration    *metrics.Histogram
	applies          outcomes // every write this node made or served for a follower

	forwardDuration  *metrics.Histogram
	forwards         outcomes         // writes this node sent to the leader
	forwardedIn      outcomes         // writes followers sent to this node
	forwardedCorrupt *metrics.Counter // forwarded commands that did not decode
	// forwardApplyWaitTimeouts counts forwarded writes answered before this
	// node had applied them itself (replica more than 1s behind).
	forwardApplyWaitTimeouts *metrics.Counter

	state        *metrics.Gauge // 0 follower, 1 candidate, 2 leader, 3 shutdown
	appliedIndex *metrics.Gauge
	commitIndex  *metrics.Gauge
	lastIndex    *metrics.Gauge
	lastContact  *metrics.Gauge // seconds since the leader was last heard from

	blocksAllocated     *metrics.Counter
	idempotencyExpiries *metrics.Counter // expiry entries the leader appended
	purgeEntries        *metrics.Counter // purge_deleted_links entries the leader appended
	linksPurged         *metrics.Counter // deleted links whose destination this replica purged

	fsmBatchDuration *metrics.Histogram
	fsmCommands      *metrics.Counter
	fsmSkipped       *metrics.Counter // replayed entries and skippable unknown commands
	fsmUnknown       *metrics.Counter // unknown commands that were not skippable
	fsmHalted        *metrics.Gauge

	snapshotCreate  *metrics.Histogram
	snapshotPersist *metrics.Histogram
	snapshotRestore *metrics.Histogram
	snapshotRefused *metrics.Counter // snapshots refused because the FSM is halted
	haltStepDowns   *metrics.Counter // leadership handed away because the FSM is halted
}

func newNodeMetrics(s *metrics.Set) *nodeMetrics {
	const p = "waymark_raft_"
	return &nodeMetrics{
		applyDuration: s.GetOrCreateHistogram(p + "apply_duration_seconds"),
		applies:       newOutcomes(s, p+"applies_total"),

		forwardDuration:          s.GetOrCreateHistogram(p + "forward_duration_seconds"),
		forwards:                 newOutcomes(s, p+"forwards_total"),
		forwardedIn:              newOutcomes(s, p+"forwarded_in_total"),
		forwardedCorrupt:         s.GetOrCreateCounter(p + `forwarded_in_total{result="corrupt"}`),
		forwardApplyWaitTimeouts: s.GetOrCreateCounter(p + "forward_apply_wait_timeouts_total"),
		pipelinesUnstuck:         s.GetOrCreateCounter(p + "pipelines_unstuck_total"),

		state:        s.GetOrCreateGauge(p+"state", nil),
		appliedIndex: s.GetOrCreateGauge(p+"applied_index", nil),
		commitIndex:  s.GetOrCreateGauge(p+"commit_index", nil),
		lastIndex:    s.GetOrCreateGauge(p+"last_index", nil),
		lastContact:  s.GetOrCreateGauge(p+"last_contact_seconds", nil),

		blocksAllocated:     s.GetOrCreateCounter(p + "blocks_allocated_total"),
		idempotencyExpiries: s.GetOrCreateCounter(p + "idempotency_expiry_entries_total"),
		purgeEntries:        s.GetOrCreateCounter(p + "purge_entries_total"),
		linksPurged:         s.GetOrCreateCounter(p + "links_purged_total"),

		fsmBatchDuration: s.GetOrCreateHistogram(p + "fsm_batch_duration_seconds"),
		fsmCommands:      s.GetOrCreateCounter(p + "fsm_commands_total"),
		fsmSkipped:       s.GetOrCreateCounter(p + "fsm_skipped_total"),
		fsmUnknown:       s.GetOrCreateCounter(p + "fsm_unknown_commands_total"),
		fsmHalted:        s.GetOrCreateGauge(p+"fsm_halted", nil),

		snapshotCreate:  s.GetOrCreateHistogram(p + "snapshot_create_duration_seconds"),
		snapshotPersist: s.GetOrCreateHistogram(p + "snapshot_persist_duration_seconds"),
		snapshotRestore: s.GetOrCreateHistogram(p + "snapshot_restore_duration_seconds"),
		snapshotRefused: s.GetOrCreateCounter(p + "snapshot_refused_total"),
		haltStepDowns:   s.GetOrCreateCounter(p + "halt_step_downs_total"),
	}
}

// outcomes counts writes by result, one series per result label.
type outcomes struct {
	ok       *metrics.Counter
	rejected *metrics.Counter // the FSM refused the command (code taken, not found...)
	noLeader *metrics.Counter
	unknown  *metrics.Counter
	failed   *metrics.Counter
}

func newOutcomes(s *metrics.Set, name string) outcomes {
	c := func(result string) *metrics.Counter {
		return s.GetOrCreateCounter(name + `{result="` + result + `"}`)
	}
	return outcomes{ok: c("ok"), rejected: c("rejected"), noLeader: c("no_leader"), unknown: c("unknown_outcome"), failed: c("error")}
}

func (o *outcomes) count(err error) {
	switch {
	case err == nil:
		o.ok.Inc()
	case errors.Is(err, store.ErrUnknownOutcome):
		o.unknown.Inc()
	case errors.Is(err, store.ErrNoLeader):
		o.noLeader.Inc()
	case !isStorageError(err):
		o.rejected.Inc()
	default:
		o.failed.Inc()
	}
}

// countApply records one apply's latency and outcome.
func (m *nodeMetrics) countApply(start time.Time, err error) {
	m.applyDuration.UpdateDuration(start)
	m.applies.count(err)
}

// countForward records one forwarded write's round trip and outcome.
func (m *nodeMetrics) countForward(start time.Time, err error) {
	m.forwardDuration.UpdateDuration(start)
	m.forwards.count(err)
}

// observe copies raft's view of itself into the gauges. lastContact is
// Node.LastContact, or the node's start when no leader was ever heard.
func (m *nodeMetrics) observe(r *hraft.Raft, lastContact time.Time) {
	m.state.Set(float64(r.State()))
	m.appliedIndex.Set(float64(r.AppliedIndex()))
	m.commitIndex.Set(float64(r.CommitIndex()))
	m.lastIndex.Set(float64(r.LastIndex()))
	if r.State() == hraft.Leader {
		m.lastContact.Set(0)
	} else {
		m.lastContact.Set(max(0, time.Since(lastContact).Seconds()))
	}
}
