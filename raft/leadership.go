package raft

import (
	"crypto/rand"
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
	if leader && n.securing.CompareAndSwap(false, true) {
		if !n.goSafe(n.ensureSecret) {
			n.securing.Store(false)
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

// LeaderID is the current leader's ID, or "" when none is known. It reads
// only raft's leader field, where Stats also builds the configuration and
// the store's applied index: lookups on a hot path ask this.
func (n *Node) LeaderID() string {
	_, id := n.raft.LeaderWithID()
	return string(id)
}
