package raft

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waymark/waymark/store"
)

// A store failure halts the FSM of one voter. The halted node must refuse
// to snapshot (its store lags raft's applied index, so a snapshot would
// stamp old state with a new index and raft would compact the entries in
// between away), hand its leadership to a voter that can apply, and report
// not ready; after a restart it replays what it missed, and no committed
// entry is lost on any node.
func TestHaltedLeaderRefusesSnapshotAndStepsDown(t *testing.T) {
	var failing atomic.Bool
	c := newCluster(t, func(cfg *Config) {
		// Every snapshot compacts all but two entries, so a snapshot
		// taken while halted would drop the entries it skipped for good.
		cfg.TrailingLogs = 2
		cfg.SnapshotThreshold = 1 << 30
		cfg.SnapshotInterval = time.Hour
	})
	v1 := c.addAt("v1", "us", t.TempDir(), func(m *member) {
		m.storeHook = func() error {
			if failing.Load() {
				return errors.New("injected write error: input/output error")
			}
			return nil
		}
	})
	v2, v3 := c.add("v2", "us"), c.add("v3", "eu")
	c.bootstrap(v1, v2, v3)
	c.onLeader("move leadership to v1", func(n *Node) error {
		if n == v1.node() {
			return nil
		}
		if err := n.TransferLeadership("v1"); err != nil {
			return fmt.Errorf("%w: %v", store.ErrNoLeader, err) // retry
		}
		return fmt.Errorf("%w: transferring", store.ErrNoLeader)
	})
	var codes []string
	for i := range 5 {
		codes = append(codes, createThrough(t, v1, fmt.Sprintf("https://example.com/before/%d", i)))
	}
	c.waitLinks(codes...)

	// The next commit on v1 fails: the FSM halts under the entry.
	failing.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	code, err := v1.node().NewCode(ctx)
	if err != nil {
		t.Fatalf("NewCode: %v", err)
	}
	halting := store.Link{Code: code, URL: "https://example.com/halting", Owner: "o1", CreatedAt: 1700000000000}
	_, _, err = v1.node().CreateLink(ctx, &halting, nil)
	cancel()
	if !errors.Is(err, store.ErrUnknownOutcome) {
		t.Fatalf("create on a failing store: %v; want ErrUnknownOutcome", err)
	}
	if ok, detail := v1.node().Ready(); ok || !strings.Contains(detail, "store failed") {
		t.Fatalf("v1 Ready after halting = %v, %q; want not ready, store failed", ok, detail)
	}
	if err := v1.node().Raft().Snapshot().Error(); err == nil {
		t.Fatalf("v1 took a snapshot while its state machine is halted")
	}

	// Leadership moves to a voter that can apply, and writes go on there.
	waitFor(t, "leadership to leave the halted v1", func() (bool, string) {
		if v1.node().IsLeader() {
			return false, "v1 still leads"
		}
		for _, m := range []*member{v2, v3} {
			if m.node().IsLeader() {
				return true, ""
			}
		}
		return false, "no leader among v2, v3"
	})
	codes = append(codes, code) // committed on v2 and v3, though v1 failed
	for i := range 5 {
		codes = append(codes, createThrough(t, v2, fmt.Sprintf("https://example.com/after/%d", i)))
	}
	if err := v1.node().Raft().Snapshot().Error(); err == nil {
		t.Fatalf("v1 took a snapshot while its state machine is halted")
	}
	if ok, _ := v1.node().Ready(); ok {
		t.Fatalf("halted v1 reports ready")
	}
	for _, m := range []*member{v2, v3} {
		st := m.store()
		waitFor(t, m.id+" to apply every entry", func() (bool, string) {
			for _, code := range codes {
				var l store.Link
				if found, err := st.GetLink([]byte(code), &l); err != nil || !found {
					return false, "missing " + code
				}
			}
			return true, ""
		})
	}

	// The disk is fine again; a restart replays every entry v1 missed.
	failing.Store(false)
	v1.stop()
	v1.start()
	c.leader()
	c.waitLinks(codes...)
	if err := v1.node().Raft().Snapshot().Error(); err != nil {
		t.Fatalf("snapshot of v1 once it caught up: %v", err)
	}
	// And once more from that snapshot, the store trusted as it is.
	v1.stop()
	v1.start()
	c.leader()
	c.waitLinks(codes...)
}
