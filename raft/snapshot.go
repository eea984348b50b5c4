package raft

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/waymark/waymark/store"
)

// Snapshot captures a consistent Pebble view while raft holds applies
// paused. Flush first: commits are not synced, and raft may compact the
// log up to this snapshot's index, after which Pebble alone must hold
// those entries' effects across a crash.
//
// A halted FSM refuses: raft's applied index has moved past entries the
// store never received, and a snapshot would stamp the store's older state
// with that newer index. Raft would then compact the log behind it and the
// missing entries would be gone for good, here and on every follower that
// installs the snapshot.
func (f *fsm) Snapshot() (hraft.FSMSnapshot, error) {
	if err := f.haltErr(); err != nil {
		f.m.snapshotRefused.Inc()
		return nil, fmt.Errorf("cannot snapshot a halted state machine: %w", err)
	}
	start := time.Now()
	if err := f.st.Flush(); err != nil {
		return nil, fmt.Errorf("cannot snapshot store: %w", err)
	}
	v := f.st.View()
	f.m.snapshotCreate.UpdateDuration(start)
	return &fsmSnapshot{view: v, m: f.m, log: f.log}, nil
}

// Restore replaces the whole store with a snapshot stream. Raft closes rc.
// Readers keep the old state until the store swaps the new one in; the
// node reports not ready meanwhile, because the old state is stale.
func (f *fsm) Restore(rc io.ReadCloser) error {
	start := time.Now()
	f.restoring.Store(true)
	defer f.restoring.Store(false)
	if err := f.st.Restore(rc); err != nil {
		return fmt.Errorf("cannot restore raft snapshot: %w", err)
	}
	// The store now matches the snapshot raft resumes from, so an earlier
	// halt no longer holds.
	if f.halted.Swap(nil) != nil {
		f.m.fsmHalted.Set(0)
	}
	f.m.snapshotRestore.UpdateDuration(start)
	applied, _ := f.st.AppliedIndex()
	f.log.Info("store restored from raft snapshot", "applied_index", applied, "duration", time.Since(start))
	if id, found, err := f.st.ClusterID(); err == nil && found {
		f.onClusterID(id)
	}
	f.onRestore()
	return nil
}

// fsmSnapshot streams a store view into raft's snapshot sink.
type fsmSnapshot struct {
	view *store.View
	m    *nodeMetrics
	log  *slog.Logger
}

func (s *fsmSnapshot) Persist(sink hraft.SnapshotSink) error {
	start := time.Now()
	n, err := s.view.WriteTo(sink)
	if err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("cannot persist raft snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("cannot persist raft snapshot: %w", err)
	}
	s.m.snapshotPersist.UpdateDuration(start)
	s.log.Info("raft snapshot persisted", "id", sink.ID(), "bytes", n, "duration", time.Since(start))
	return nil
}

func (s *fsmSnapshot) Release() { s.view.Release() }

// storeBehindSnapshot reports whether the store lacks effects that the
// newest snapshot holds, in which case raft must restore that snapshot at
// start instead of trusting Pebble (the store was lost or wiped). Entries
// that never reach the FSM (no-ops, barriers) do not move the store's
// applied index, so a store just below the snapshot index is behind only
// if a command or configuration lies in between, or the log no longer
// says.
func storeBehindSnapshot(applied uint64, snaps hraft.SnapshotStore, logs hraft.LogStore) (behind bool, snapIndex uint64, err error) {
	metas, err := snaps.List()
	if err != nil {
		return false, 0, fmt.Errorf("cannot list raft snapshots: %w", err)
	}
	if len(metas) == 0 {
		return false, 0, nil
	}
	snapIndex = metas[0].Index // newest first
	if applied >= snapIndex {
		return false, snapIndex, nil
	}
	var l hraft.Log
	for i := applied + 1; i <= snapIndex; i++ {
		if err := logs.GetLog(i, &l); err != nil {
			return true, snapIndex, nil
		}
		if l.Type == hraft.LogCommand || l.Type == hraft.LogConfiguration {
			return true, snapIndex, nil
		}
	}
	return false, snapIndex, nil
}
