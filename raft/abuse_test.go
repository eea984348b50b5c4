package raft

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/waymark/waymark/store"
)

// suspendedSets records, per node, the suspended owners the FSM reported.
type suspendedSets struct {
	mu   sync.Mutex
	sets map[string]map[string]bool
}

func (s *suspendedSets) hook(cfg *Config) {
	node := cfg.NodeID
	cfg.OnOwnerSuspended = func(owner string, suspended bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.sets[node] == nil {
			s.sets[node] = map[string]bool{}
		}
		if suspended {
			s.sets[node][owner] = true
		} else {
			delete(s.sets[node], owner)
		}
	}
}

func (s *suspendedSets) has(node, owner string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sets[node][owner]
}

// A suspension and its lifting go through the log: every replica's store
// and in-memory set follow, whichever node took the command.
func TestOwnerSuspensionReplicates(t *testing.T) {
	sets := &suspendedSets{sets: map[string]map[string]bool{}}
	c := newCluster(t, sets.hook)
	v1, v2, v3 := c.add("v1", "us"), c.add("v2", "eu"), c.add("v3", "ap")
	c.bootstrap(v1, v2, v3)
	ada := store.Owner{ID: "own_ada", Name: "Ada", CreatedAt: 1}
	c.onLeader("create owner", func(n *Node) error {
		_, err := n.CreateOwner(context.Background(), &ada, store.HashAPIKey([]byte("key")))
		return err
	})
	var follower *member
	for _, m := range c.live() {
		if !m.node().IsLeader() {
			follower = m
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// suspend writes through the follower (forwarded to the leader),
	// again while leadership moves (ErrNoLeader: nothing was written).
	suspend := func(owner string, suspended bool, at int64, reason string) (store.Owner, error) {
		var o store.Owner
		var err error
		waitFor(t, "a leader to take the write", func() (bool, string) {
			o, err = follower.node().SetOwnerSuspended(ctx, owner, suspended, at, reason)
			return !errors.Is(err, store.ErrNoLeader), fmt.Sprint(err)
		})
		return o, err
	}
	o, err := suspend("own_ada", true, 1234, "phishing")
	if err != nil || !o.Suspended || o.SuspendedAt != 1234 || o.SuspendReason != "phishing" {
		t.Fatalf("suspend through %s = %+v, %v; want suspended at 1234 for phishing", follower.id, o, err)
	}
	for _, m := range c.live() {
		waitFor(t, m.id+" to apply the suspension", func() (bool, string) {
			o, _, err := m.store().Owner("own_ada")
			return err == nil && o.Suspended && sets.has(m.id, "own_ada"), fmt.Sprintf("store %+v (%v), set %v", o, err, sets.has(m.id, "own_ada"))
		})
	}
	if _, err := suspend("nobody", true, 1, "x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("suspend an unknown owner: %v; want ErrNotFound", err)
	}

	o, err = suspend("own_ada", false, 2000, "ignored")
	if err != nil || o.Suspended || o.SuspendReason != "" {
		t.Fatalf("unsuspend = %+v, %v; want not suspended, no reason", o, err)
	}
	for _, m := range c.live() {
		waitFor(t, m.id+" to apply the unsuspension", func() (bool, string) {
			o, _, err := m.store().Owner("own_ada")
			return err == nil && !o.Suspended && !sets.has(m.id, "own_ada"), fmt.Sprintf("store %+v (%v), set %v", o, err, sets.has(m.id, "own_ada"))
		})
	}
}

// The leader purges the destination of a link deleted more than
// PurgeAfter ago, through the log, so every replica purges it; other
// links keep theirs, and the code stays taken.
func TestPurgeDeletedLinksSweep(t *testing.T) {
	c := newCluster(t, func(cfg *Config) { cfg.PurgeAfter = 300 * time.Millisecond })
	v1, v2, v3 := c.add("v1", "us"), c.add("v2", "eu"), c.add("v3", "ap")
	c.bootstrap(v1, v2, v3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, code := range []string{"gone1", "kept1", "late1"} {
		c.onLeader("create "+code, func(n *Node) error {
			_, _, err := n.CreateLink(ctx, testLink(code), nil)
			return err
		})
	}
	c.onLeader("delete gone1", func(n *Node) error {
		_, err := n.UpdateLink(ctx, &store.LinkPatch{Code: "gone1", Owner: "o1", UpdatedAt: time.Now().UnixMilli(), SetStatus: true, Status: store.StatusDisabled})
		return err
	})
	// Deleted with a time far ahead: not due however long the test runs.
	c.onLeader("delete late1", func(n *Node) error {
		_, err := n.UpdateLink(ctx, &store.LinkPatch{Code: "late1", Owner: "o1", UpdatedAt: time.Now().Add(time.Hour).UnixMilli(), SetStatus: true, Status: store.StatusDisabled})
		return err
	})
	for _, m := range c.live() {
		waitFor(t, m.id+" to purge gone1", func() (bool, string) {
			var l store.Link
			found, err := m.store().GetLink([]byte("gone1"), &l)
			return err == nil && found && l.Purged(), fmt.Sprintf("%+v (found %v, %v)", l, found, err)
		})
	}
	c.waitCaughtUp()
	for _, m := range c.live() {
		if l := mustGetLink(t, m.store(), "kept1"); l.URL != "https://example.com/kept1" || l.Status != store.StatusActive {
			t.Errorf("%s: kept1 = %+v; want untouched", m.id, l)
		}
		if l := mustGetLink(t, m.store(), "late1"); l.URL != "https://example.com/late1" {
			t.Errorf("%s: late1 deleted in the future = %+v; want its destination kept", m.id, l)
		}
	}
	c.onLeader("create over a purged code", func(n *Node) error {
		_, _, err := n.CreateLink(ctx, testLink("gone1"), nil)
		if errors.Is(err, store.ErrNoLeader) {
			return err // leadership moved: try again
		}
		if !errors.Is(err, store.ErrCodeTaken) {
			t.Errorf("create gone1 again: %v; want ErrCodeTaken", err)
		}
		return nil
	})
	c.onLeader("reactivate a purged link", func(n *Node) error {
		_, err := n.UpdateLink(ctx, &store.LinkPatch{Code: "gone1", Owner: "o1", SetStatus: true, Status: store.StatusActive})
		if errors.Is(err, store.ErrNoLeader) {
			return err
		}
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("reactivate gone1: %v; want ErrNotFound", err)
		}
		return nil
	})
}
