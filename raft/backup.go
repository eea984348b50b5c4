package raft

import (
	"errors"
	"fmt"
	"io"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/waymark/waymark/store"
)

// ErrNotLeader means an operation that only the leader can do reached a
// follower.
var ErrNotLeader = errors.New("not the raft leader")

// RestoreBackup replaces the whole replicated state with a store stream
// (store.View.WriteTo) of size bytes, through raft's user restore: the
// leader installs it as a new snapshot and every follower installs it from
// the leader. appliedIndex is the source store's applied index: the new
// snapshot's index is placed above it, so no later entry can fall at or
// below the index the restored store reports and be skipped as applied.
// The caller must have checked the stream: raft panics if the FSM refuses
// it half-way.
func (n *Node) RestoreBackup(r io.Reader, size int64, appliedIndex uint64, timeout time.Duration) error {
	if !n.IsLeader() {
		return fmt.Errorf("cannot restore a backup: %w (leader: %q)", ErrNotLeader, n.Stats().LeaderID)
	}
	meta := &hraft.SnapshotMeta{Version: hraft.SnapshotVersionMax, Index: appliedIndex, Size: size}
	if err := n.raft.Restore(meta, r, timeout); err != nil {
		if errors.Is(err, hraft.ErrNotLeader) || errors.Is(err, hraft.ErrLeadershipLost) {
			return fmt.Errorf("cannot restore a backup: %w: %w", ErrNotLeader, err)
		}
		return fmt.Errorf("cannot restore a backup: %w", err)
	}
	return nil
}

// Backup is a consistent view of the whole store for `waymark snapshot
// save`. Release it when done.
type Backup struct {
	view *store.View
	// AppliedIndex is read just after the view is taken, so it is at
	// least the index the view holds (RestoreBackup needs no less).
	AppliedIndex uint64
}

// OpenBackup takes the view.
func (n *Node) OpenBackup() (*Backup, error) {
	v := n.st.View()
	idx, err := n.st.AppliedIndex()
	if err != nil {
		v.Release()
		return nil, fmt.Errorf("cannot read the applied index: %w", err)
	}
	return &Backup{view: v, AppliedIndex: idx}, nil
}

// WriteTo streams the view in the format of store.View.WriteTo.
func (b *Backup) WriteTo(w io.Writer) (int64, error) { return b.view.WriteTo(w) }

// Release frees the view.
func (b *Backup) Release() { b.view.Release() }
