package raft

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/waymark/waymark/store"
)

// applyResult is the FSM's answer for one log entry; raft hands it to the
// ApplyFuture on the node that proposed the entry.
type applyResult struct {
	Index    uint64
	Skipped  bool // already applied before (replay) or an unknown skippable command
	Link     store.Link
	Block    store.Block
	Existing *store.Idempotency // CreateLink found an earlier answer for its idempotency key
	Site     *store.Site        // the site as UpdateSite left it
	Report   *store.Report      // the case as FileReport or ResolveReport left it
	Bulk     []store.BulkResult // create_links_bulk: one result per item, in order
	Domain   *store.Domain      // the custom domain as domain_update left it
	Err      error
}

// fsm applies committed log entries to the store. Raft calls ApplyBatch,
// Snapshot and Restore from one goroutine; Persist runs beside applies.
type fsm struct {
	st       *store.Store
	log      *slog.Logger
	m        *nodeMetrics
	onChange func(code string)
	// onChanging marks codes whose change is being committed (OnChanging).
	onChanging func(code string)
	onSite     func(store.Site)
	onRestore  func()
	applied    *appliedWatch // signalled after every committed batch; nil in some tests

	// halted is set when the store failed under a batch. The batch was not
	// committed, so the store stays consistent with its applied index, but
	// this process can no longer keep up with the log: it stops applying
	// and reports not ready until a restart replays the entries.
	halted atomic.Pointer[error]
	// onHalt runs (on the FSM goroutine, so it must not block) once the
	// FSM halts; the node hands its leadership away.
	onHalt func()
	// onClusterID runs with the cluster id once the store is known to hold
	// this log's cluster (set, checked on replay, or restored); the node
	// records it beside the raft log for the check at start.
	onClusterID func(id string)
	// restoring is set while Restore swaps a snapshot in: the node reports
	// not ready, though readers keep seeing the old state until the swap.
	restoring atomic.Bool
	// onSuspended keeps the in-memory set of suspended owners
	// (Config.OnOwnerSuspended).
	onSuspended func(owner string, suspended bool)
	// onKeyRevoked drops a revoked API key from the caches
	// (Config.OnKeyRevoked).
	onKeyRevoked func(store.KeyHash)
}

var _ hraft.BatchingFSM = (*fsm)(nil)

func newFSM(st *store.Store, cfg Config, m *nodeMetrics) *fsm {
	if cfg.OnChanging == nil {
		cfg.OnChanging = func(string) {}
	}
	if cfg.OnOwnerSuspended == nil {
		cfg.OnOwnerSuspended = func(string, bool) {}
	}
	if cfg.OnKeyRevoked == nil {
		cfg.OnKeyRevoked = func(store.KeyHash) {}
	}
	return &fsm{
		st:           st,
		log:          cfg.Logger,
		m:            m,
		onChange:     cfg.OnChange,
		onChanging:   cfg.OnChanging,
		onSite:       cfg.OnSite,
		onSuspended:  cfg.OnOwnerSuspended,
		onKeyRevoked: cfg.OnKeyRevoked,
		onRestore:    cfg.OnRestore,
		onHalt:       func() {},
		onClusterID:  func(string) {},
	}
}

// haltErr returns why the FSM stopped applying, or nil.
func (f *fsm) haltErr() error {
	if p := f.halted.Load(); p != nil {
		return *p
	}
	return nil
}

// Apply applies one entry; raft uses ApplyBatch, tests may use this.
func (f *fsm) Apply(l *hraft.Log) any { return f.ApplyBatch([]*hraft.Log{l})[0] }

// ApplyBatch applies logs through one store batch that also records the
// index of the last one. Entries at or below the store's applied index are
// already in the store (raft replays the log after a restart) and are
// skipped. A command that is refused gets its error in its own result; the
// rest of the batch still commits.
func (f *fsm) ApplyBatch(logs []*hraft.Log) []any {
	start := time.Now()
	resps := make([]any, len(logs))
	if err := f.haltErr(); err != nil {
		return f.failAll(logs, resps, err)
	}
	applied, err := f.st.AppliedIndex()
	if err != nil {
		return f.failAll(logs, resps, f.halt(err))
	}
	b := f.st.NewBatch()
	defer b.Close()
	a := newApplier(f.st, b)
	last := applied
	for i, l := range logs {
		res := &applyResult{Index: l.Index}
		resps[i] = res
		if l.Index <= applied {
			res.Skipped = true
			f.m.fsmSkipped.Inc()
			if err := f.checkSkipped(l); err != nil {
				return f.failAll(logs, resps, f.halt(err))
			}
			continue
		}
		last = l.Index
		if l.Type == hraft.LogCommand {
			f.applyCommand(a, l, res)
			if a.failed != nil {
				return f.failAll(logs, resps, f.halt(a.failed))
			}
		}
	}
	if last == applied {
		return resps
	}
	// Pebble shows a synced batch to readers before its fsync returns, so
	// the cache stops serving and filling the changed codes first;
	// otherwise a redirect could serve the old link from the cache while
	// the store, and its applied index, already hold the takedown.
	for _, code := range a.changed {
		f.onChanging(code)
	}
	// A suspension takes hold before the commit, for the same reason; a
	// lifted one only once it is committed.
	for _, s := range a.suspensions {
		if s.suspended {
			f.onSuspended(s.id, true)
		}
	}
	// A revoked key leaves the caches before the commit and again after
	// it, so no lookup racing the commit can put it back.
	for _, h := range a.revokedKeys {
		f.onKeyRevoked(h)
	}
	err = b.Commit(last)
	// Evict before the futures resolve, so an acknowledged edit or takedown
	// is what the very next redirect sees (and end the fence either way).
	for _, code := range a.changed {
		f.onChange(code)
	}
	if err != nil {
		return f.failAll(logs, resps, f.halt(err))
	}
	for _, s := range a.sites {
		f.onSite(s)
	}
	for _, s := range a.suspensions { // in log order: the last change wins
		f.onSuspended(s.id, s.suspended)
	}
	for _, h := range a.revokedKeys {
		f.onKeyRevoked(h)
	}
	f.m.linksPurged.Add(a.purged)
	if a.clusterID != "" {
		f.onClusterID(a.clusterID)
	}
	f.applied.advance(last) // after the evictions, like the futures
	f.m.fsmBatchDuration.UpdateDuration(start)
	return resps
}

func (f *fsm) applyCommand(a *applier, l *hraft.Log, res *applyResult) {
	h, c, err := decodeCommand(l.Data)
	switch {
	case errors.Is(err, errUnknownCommand) && h.skippable():
		res.Skipped = true
		f.m.fsmSkipped.Inc()
		f.log.Warn("skipping raft command this node does not know; upgrade it",
			"index", l.Index, "type", h.typ, "version", h.version)
	case errors.Is(err, store.ErrCorrupt):
		// Bytes no correct writer produces (or a field the store could not
		// hold): every replica decodes them alike and refuses the entry
		// alike, so the replicas stay equal and applying goes on.
		f.m.fsmUnknown.Inc()
		f.log.Error("refusing committed raft command that does not decode; every replica refuses it",
			"index", l.Index, "type", h.typ, "version", h.version, "err", err)
		res.Err = fmt.Errorf("cannot apply entry %d: %w", l.Index, err)
	case err != nil:
		// A committed entry every node must apply, and this one cannot:
		// the node is older than the log. Its replica now differs from the
		// others for this entry.
		f.m.fsmUnknown.Inc()
		f.log.Error("broken invariant: cannot apply committed raft command; this node's replica misses its effect",
			"index", l.Index, "type", h.typ, "version", h.version, "err", err)
		res.Err = fmt.Errorf("cannot apply entry %d: %w", l.Index, err)
	default:
		f.m.fsmCommands.Inc()
		c.apply(a, l.Index, res)
	}
}

// halt stops the FSM after a store failure and returns the reason.
func (f *fsm) halt(err error) error {
	if errors.Is(err, store.ErrOtherCluster) {
		err = fmt.Errorf("refusing to apply this cluster's raft log: %w; start the node with an empty store (or with its own cluster's raft dir)", err)
	} else {
		err = fmt.Errorf("store failed under a raft batch; restart the node to replay the log: %w", err)
	}
	if f.halted.CompareAndSwap(nil, &err) {
		f.m.fsmHalted.Set(1)
		f.log.Error("raft state machine halted", "err", err)
		f.onHalt()
	}
	return f.haltErr()
}

// checkSkipped looks at an entry the store claims to hold already. A
// set_cluster_id entry among them must name the store's own cluster: if it
// does not, the store came from another cluster and "already applied" is
// false for every entry up to its applied index.
func (f *fsm) checkSkipped(l *hraft.Log) error {
	if l.Type != hraft.LogCommand || len(l.Data) == 0 || cmdType(l.Data[0]) != cmdSetClusterID {
		return nil
	}
	_, c, err := decodeCommand(l.Data)
	if err != nil {
		return nil // refused when it was applied; nothing to compare
	}
	want := c.(*setClusterIDCmd).ID
	have, found, err := f.st.ClusterID()
	switch {
	case err != nil:
		return err
	case !found:
		return fmt.Errorf("store has no cluster id, but claims entry %d, which sets cluster %q: %w", l.Index, want, store.ErrOtherCluster)
	case have != want:
		return fmt.Errorf("store holds cluster %q, entry %d of the raft log sets cluster %q: %w", have, l.Index, want, store.ErrOtherCluster)
	}
	f.onClusterID(want)
	return nil
}

// failAll answers every entry of a batch that was not committed. The
// entries are in the log, so the cluster applies them: unknown outcome.
func (f *fsm) failAll(logs []*hraft.Log, resps []any, err error) []any {
	for i, l := range logs {
		resps[i] = &applyResult{Index: l.Index, Err: fmt.Errorf("cannot apply entry %d: %w: %w", l.Index, store.ErrUnknownOutcome, err)}
	}
	return resps
}
