package raft

import (
	"context"
	"fmt"
	"strconv"
	"time"

	hraft "github.com/hashicorp/raft"
)

// Stats is a point-in-time view of this node's raft state.
type Stats struct {
	NodeID            string
	State             string // Follower, Candidate, Leader or Shutdown
	LeaderID          string
	LeaderAddr        string
	AppliedIndex      uint64 // raft's applied index (includes no-op entries)
	StoreAppliedIndex uint64 // last entry whose effects are in Pebble
	CommitIndex       uint64
	LastIndex         uint64
	LastSnapshotIndex uint64
	LastContact       time.Time // last message from the leader; zero on the leader
	Servers           int       // servers in the latest configuration, voters and non-voters
	Voter             bool      // this node has a vote in the latest configuration
	Ready             bool
	ReadyDetail       string
}

// Stats reports this node's raft state.
func (n *Node) Stats() Stats {
	addr, id := n.raft.LeaderWithID()
	storeApplied, _ := n.st.AppliedIndex()
	snapIndex, _ := strconv.ParseUint(n.raft.Stats()["last_snapshot_index"], 10, 64)
	s := Stats{
		NodeID:            n.cfg.NodeID,
		State:             n.raft.State().String(),
		LeaderID:          string(id),
		LeaderAddr:        string(addr),
		AppliedIndex:      n.raft.AppliedIndex(),
		StoreAppliedIndex: storeApplied,
		CommitIndex:       n.raft.CommitIndex(),
		LastIndex:         n.raft.LastIndex(),
		LastSnapshotIndex: snapIndex,
	}
	if n.raft.State() != hraft.Leader {
		s.LastContact = n.raft.LastContact()
	}
	for _, srv := range n.raft.GetConfiguration().Configuration().Servers {
		s.Servers++
		if string(srv.ID) == n.cfg.NodeID {
			s.Voter = srv.Suffrage == hraft.Voter
		}
	}
	s.Ready, s.ReadyDetail = n.Ready()
	return s
}

// LastContact is when this node last heard from the leader: the current
// time on the leader itself, zero on a node that never heard from one.
// time.Since(LastContact()) is how stale a follower's replica may be.
func (n *Node) LastContact() time.Time {
	if n.raft.State() == hraft.Leader {
		return time.Now()
	}
	return n.raft.LastContact()
}

// lastContactOrStart is LastContact, or the node's start when no leader
// was ever heard: a node that never caught up is as stale as its uptime,
// not fresh.
func (n *Node) lastContactOrStart() time.Time {
	if lc := n.LastContact(); !lc.IsZero() {
		return lc
	}
	return n.started
}

// inConfiguration reports whether this node is in the latest raft
// configuration it knows.
func (n *Node) inConfiguration() bool {
	for _, srv := range n.raft.GetConfiguration().Configuration().Servers {
		if string(srv.ID) == n.cfg.NodeID {
			return true
		}
	}
	return false
}

// Ready reports whether this node can serve: a leader is known, the FSM has
// caught up with the log once since start, is not halted and is not
// installing a snapshot, and the cluster permutation key is in the store.
func (n *Node) Ready() (ok bool, detail string) {
	if err := n.fsm.haltErr(); err != nil {
		return false, err.Error()
	}
	if n.fsm.restoring.Load() {
		return false, "installing a raft snapshot"
	}
	state := n.raft.State()
	if state == hraft.Shutdown {
		return false, "raft is shut down"
	}
	addr, id := n.raft.LeaderWithID()
	if addr == "" {
		if !n.inConfiguration() {
			return false, "no leader yet: waiting to be added to a raft cluster (no bootstrap and no raft state)"
		}
		if lc := n.raft.LastContact(); !lc.IsZero() {
			return false, fmt.Sprintf("no leader yet: %s, last heard from a leader %s ago", state, time.Since(lc).Round(time.Millisecond))
		}
		return false, fmt.Sprintf("no leader yet: %s, waiting for an election", state)
	}
	if !n.caughtUp.Load() {
		commit, applied := n.raft.CommitIndex(), n.raft.AppliedIndex()
		if commit == 0 || applied < commit {
			return false, fmt.Sprintf("applying raft log: %d of %d", applied, commit)
		}
		// raft counts an entry applied once it is handed to the FSM's
		// queue; the store may still be behind (a restarted node answered
		// 404 for a link created after its last snapshot).
		if stored, _ := n.applied.load(); stored < n.lastFSMIndex(commit) {
			return false, fmt.Sprintf("applying raft log: store at %d of %d", stored, commit)
		}
		n.caughtUp.Store(true)
	}
	if _, err := n.Permuter(); err != nil {
		return false, "cluster secret not applied yet"
	}
	if n.claimingRegion.Load() {
		return false, fmt.Sprintf("claiming region %q for the new cluster", n.cfg.Region)
	}
	return true, fmt.Sprintf("%s, leader %s", state, id)
}

// WaitReady blocks until Ready reports true or ctx ends.
func (n *Node) WaitReady(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		ok, detail := n.Ready()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cannot wait for raft to be ready (%s): %w", detail, ctx.Err())
		case <-t.C:
		}
	}
}

// lastFSMIndex is the index of the last entry at or below commit that
// raft hands to the FSM. No-op and barrier entries never reach it, so the
// store's applied index stops short of a commit index that ends in one.
// An entry missing from the log (compacted into a snapshot) ends the walk:
// the store got everything up to there from the snapshot.
func (n *Node) lastFSMIndex(commit uint64) uint64 {
	first, err := n.logs.FirstIndex()
	if err != nil {
		return commit
	}
	var l hraft.Log
	for i := commit; i >= first && i > 0; i-- {
		if err := n.logs.GetLog(i, &l); err != nil {
			return 0
		}
		if l.Type == hraft.LogCommand || l.Type == hraft.LogConfiguration {
			return i
		}
	}
	return 0
}
