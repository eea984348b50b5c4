package raft

import (
	"sync/atomic"

	hraft "github.com/hashicorp/raft"
)

// guardedLogStore refuses to store new log entries on a follower while
// Config.LogGuard reports an error (the node's disk guard: the disk is
// nearly full). The follower then rejects the leader's appends, which the
// leader retries, instead of taking entries that applying to Pebble would
// need space for: Pebble treats a failed WAL write as fatal. When the
// guard clears, the leader's retries catch the follower up.
//
// The leader is not guarded here: its new entries are refused before they
// reach Raft (the node refuses the writes), and a leader whose log store
// failed would step down into elections, whose term writes hashicorp/raft
// cannot survive failing.
type guardedLogStore struct {
	hraft.LogStore
	raft  atomic.Pointer[hraft.Raft] // set once raft runs; raft calls in before
	guard func() error
}

func (g *guardedLogStore) check() error {
	if r := g.raft.Load(); r != nil && r.State() == hraft.Leader {
		return nil
	}
	return g.guard()
}

func (g *guardedLogStore) StoreLog(l *hraft.Log) error {
	if err := g.check(); err != nil {
		return err
	}
	return g.LogStore.StoreLog(l)
}

func (g *guardedLogStore) StoreLogs(ls []*hraft.Log) error {
	if err := g.check(); err != nil {
		return err
	}
	return g.LogStore.StoreLogs(ls)
}

// logStore is the store raft writes entries to, and a function to call
// with raft once it runs.
func (n *Node) logStore(s hraft.LogStore) (hraft.LogStore, func(*hraft.Raft)) {
	if n.cfg.LogGuard == nil {
		return s, func(*hraft.Raft) {}
	}
	g := &guardedLogStore{LogStore: s, guard: n.cfg.LogGuard}
	return g, g.raft.Store
}
