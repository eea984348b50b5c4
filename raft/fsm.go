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
	Err      error
}

// fsm applies committed log entries to the store. Raft calls ApplyBatch,
// Snapshot and Restore from one goroutine; Persist runs beside applies.
type fsm struct {
	st        *store.Store
	log       *slog.Logger
	m         *nodeMetrics
	onChange  func(code string)
	onSite    func(store.Site)
	onRestore func()
	applied   *appliedWatch // signalled after every committed batch; nil in some tests

	// halted is set when the store failed under a batch. The batch was not
	// committed, so the store stays consistent with its applied index, but
	// this process can no longer keep up with the log: it stops applying
	// and reports not ready until a restart replays the entries.
	halted atomic.Pointer[error]
}

var _ hraft.BatchingFSM = (*fsm)(nil)

func newFSM(st *store.Store, cfg Config, m *nodeMetrics) *fsm {
	return &fsm{
		st:        st,
		log:       cfg.Logger,
		m:         m,
		onChange:  cfg.OnChange,
		onSite:    cfg.OnSite,
		onRestore: cfg.OnRestore,
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
	if err := b.Commit(last); err != nil {
		return f.failAll(logs, resps, f.halt(err))
	}
	// Evict before the futures resolve, so an acknowledged edit or takedown
	// is what the very next redirect sees.
	for _, code := range a.changed {
		f.onChange(code)
	}
	for _, s := range a.sites {
		f.onSite(s)
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
	case err != nil:
		// A committed entry every node must apply, and this one cannot:
		// the node is older than the log or the entry is damaged. Its
		// replica now differs from the others for this entry.
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
	err = fmt.Errorf("store failed under a raft batch; restart the node to replay the log: %w", err)
	if f.halted.CompareAndSwap(nil, &err) {
		f.m.fsmHalted.Set(1)
		f.log.Error("raft state machine halted", "err", err)
	}
	return f.haltErr()
}

// failAll answers every entry of a batch that was not committed. The
// entries are in the log, so the cluster applies them: unknown outcome.
func (f *fsm) failAll(logs []*hraft.Log, resps []any, err error) []any {
	for i, l := range logs {
		resps[i] = &applyResult{Index: l.Index, Err: fmt.Errorf("cannot apply entry %d: %w: %w", l.Index, store.ErrUnknownOutcome, err)}
	}
	return resps
}
