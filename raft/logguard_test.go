package raft

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waymark/waymark/store"
)

// A follower whose disk guard trips takes no new entries (and so writes
// nothing to Pebble) while the leader goes on committing with its quorum;
// once the guard clears, the follower catches up by itself.
func TestLogGuardHoldsFollowerBack(t *testing.T) {
	var full atomic.Bool
	c := newCluster(t, func(cfg *Config) {
		if cfg.NodeID == "e1" {
			cfg.LogGuard = func() error {
				if full.Load() {
					return fmt.Errorf("%w: test disk", store.ErrStorageFull)
				}
				return nil
			}
		}
	})
	v1 := c.add("v1", "us")
	c.bootstrap(v1)
	e1 := c.add("e1", "eu")
	c.onLeader("add e1", func(n *Node) error { return n.AddNonvoter("e1", e1.node().Addr()) })
	first := createThrough(t, v1, "https://example.com/first")
	c.waitLinks(first)

	full.Store(true)
	before, _ := e1.store().AppliedIndex()
	codes := make([]string, 5)
	for i := range codes {
		codes[i] = createThrough(t, v1, fmt.Sprintf("https://example.com/held/%d", i))
	}
	// Give replication every chance to (wrongly) reach e1.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if idx, _ := e1.store().AppliedIndex(); idx != before {
			t.Fatalf("e1 applied up to %d while its guard refused entries (was %d)", idx, before)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var l store.Link
	if found, _ := e1.store().GetLink([]byte(codes[0]), &l); found {
		t.Fatal("e1 has a link committed while its guard refused entries")
	}

	full.Store(false)
	c.waitLinks(codes...)
	c.waitCaughtUp()
}
