package raft

import (
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/waymark/waymark/store"
)

// watchLeadership turns raft's leadership signal into Config.OnLeader calls
// and, on gaining leadership, makes sure the cluster has a permutation key.
// raft.LeaderCh never blocks raft: when this loop is slow, raft replaces
// the pending value instead of waiting. Two equal values in a row therefore
// mean the opposite change was dropped in between, and it is replayed, so
// OnLeader always sees true and false alternate.
func (n *Node) watchLeadership() {
	ch := n.raft.LeaderCh()
	leader := false
	for {
		select {
		case <-n.ctx.Done():
			if leader {
				n.leadershipChanged(false)
			}
			return
		case now := <-ch:
			if now == leader {
				n.leadershipChanged(!now)
			}
			leader = now
			n.leadershipChanged(now)
		}
	}
}

func (n *Node) leadershipChanged(leader bool) {
	n.log.Info("raft leadership changed", "leader", leader)
	n.cfg.OnLeader(leader)
	if leader && n.fsm.haltErr() != nil {
		n.stepDownHalted()
	}
	if leader && n.securing.CompareAndSwap(false, true) {
		if !n.goSafe(n.ensureSecret) {
			n.securing.Store(false)
		}
	}
	if leader && n.sweeping.CompareAndSwap(false, true) {
		if !n.goSafe(n.sweepIdempotency) {
			n.sweeping.Store(false)
		}
	}
	if leader && n.cfg.PurgeAfter > 0 && n.purging.CompareAndSwap(false, true) {
		if !n.goSafe(n.sweepDeletedLinks) {
			n.purging.Store(false)
		}
	}
}

// stepDownHalted hands the leadership of a halted node to another voter.
// A halted FSM applies nothing, so as leader it would answer every write
// with an unknown outcome; its log is still fine, so it stays a voter and
// keeps acknowledging appends. It can win an election again, and then
// leadershipChanged calls this again. In a single-voter cluster there is
// no one to hand over to, and it retries until the node is restarted.
func (n *Node) stepDownHalted() {
	if !n.steppingDown.CompareAndSwap(false, true) {
		return
	}
	if !n.goSafe(n.stepDownLoop) {
		n.steppingDown.Store(false)
	}
}

func (n *Node) stepDownLoop() {
	defer n.steppingDown.Store(false)
	warned := false
	for n.ctx.Err() == nil && n.IsLeader() && n.fsm.haltErr() != nil {
		err := n.raft.LeadershipTransfer().Error()
		if err == nil {
			n.m.haltStepDowns.Inc()
			n.log.Warn("halted state machine: handed raft leadership to another voter")
			continue // loop once more to confirm
		}
		if !warned {
			n.log.Error("halted state machine: cannot hand raft leadership away; retrying", "err", err)
			warned = true
		}
		select {
		case <-n.ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ensureSecret applies SetSecret on a new leader whose store has no key,
// until it has one or this node stops leading. It first waits for a
// barrier, so every earlier entry (an earlier leader's SetSecret included)
// is in the store before it looks; and only a node that bootstrapped the
// cluster originates a key. The store keeps the first key applied, so
// racing leaders cannot change it either way.
func (n *Node) ensureSecret() {
	defer n.securing.Store(false)
	var s secretAttempt
	for n.ctx.Err() == nil && n.IsLeader() {
		if n.trySetSecret(&s) {
			return
		}
		select {
		case <-n.ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// secretAttempt is ensureSecret's progress across attempts.
type secretAttempt struct {
	barrier bool // a barrier of this leadership term has been applied
	warned  bool
}

// trySetSecret makes one attempt; true means the store has a key now.
func (n *Node) trySetSecret(s *secretAttempt) bool {
	if !s.barrier {
		if err := n.raft.Barrier(n.cfg.ApplyTimeout).Error(); err != nil {
			n.log.Warn("cannot wait for the raft log to apply; retrying", "err", err)
			return false
		}
		s.barrier = true
	}
	if !n.ensureClusterID() {
		return false
	}
	if _, found, err := n.st.Secret(); err != nil {
		n.log.Warn("cannot read cluster permutation key; retrying", "err", err)
		return false
	} else if found {
		return true
	}
	if !n.mayInitSecret.Load() {
		if !s.warned {
			n.log.Warn("leader without a cluster permutation key, and this node did not bootstrap the cluster; waiting for one that did")
			s.warned = true
		}
		return false
	}
	key := n.cfg.Secret
	if key == nil {
		key = make([]byte, store.KeySize)
		rand.Read(key)
	}
	if _, err := n.applyLocal(n.ctx, appendSetSecret(nil, key)); err != nil {
		n.log.Warn("cannot set cluster permutation key; retrying", "err", err)
		return false
	}
	n.log.Info("cluster permutation key set")
	return true
}

// ensureClusterID applies SetClusterID once the store of a leader, after
// its barrier, still has none: the first leader of a new cluster (or of a
// cluster older than cluster ids) names it. After the barrier every
// earlier entry is applied, so an id some earlier leader set is seen; the
// store keeps the first id and refuses to follow a log with another.
func (n *Node) ensureClusterID() bool {
	if _, found, err := n.st.ClusterID(); err != nil {
		n.log.Warn("cannot read cluster id; retrying", "err", err)
		return false
	} else if found {
		return true
	}
	id := newClusterID()
	if _, err := n.applyLocal(n.ctx, appendSetClusterID(nil, id)); err != nil {
		n.log.Warn("cannot set cluster id; retrying", "err", err)
		return false
	}
	n.log.Info("cluster id set", "cluster_id", id)
	return true
}

// newClusterID is 16 random bytes in hex.
func newClusterID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// LeaderID is the current leader's ID, or "" when none is known. It reads
// only raft's leader field, where Stats also builds the configuration and
// the store's applied index: lookups on a hot path ask this.
func (n *Node) LeaderID() string {
	_, id := n.raft.LeaderWithID()
	return string(id)
}
