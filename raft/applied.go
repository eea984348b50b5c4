package raft

import (
	"context"
	"sync"
	"time"
)

// appliedWatch is the store's applied index as the FSM advances it, with a
// channel that closes on every advance, so a waiter sleeps until the entry
// it needs is in Pebble. raft's own AppliedIndex moves as soon as an entry
// is queued for the FSM, before its effects are visible, so it cannot
// serve read-your-writes.
type appliedWatch struct {
	mu      sync.Mutex
	index   uint64
	changed chan struct{} // closed and replaced when index moves
}

func newAppliedWatch(index uint64) *appliedWatch {
	return &appliedWatch{index: index, changed: make(chan struct{})}
}

// advance records that the store has applied up to index.
func (w *appliedWatch) advance(index uint64) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if index == w.index {
		return
	}
	// A restored snapshot may move the index either way; waiters re-check.
	w.index = index
	close(w.changed)
	w.changed = make(chan struct{})
}

func (w *appliedWatch) load() (uint64, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.index, w.changed
}

// wait blocks until index is applied, ctx ends or timeout passes, and
// reports whether index was reached.
func (w *appliedWatch) wait(ctx context.Context, index uint64, timeout time.Duration) bool {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		got, changed := w.load()
		if got >= index {
			return true
		}
		select {
		case <-changed:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}
