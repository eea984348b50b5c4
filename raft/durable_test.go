package raft

import (
	"context"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/waymark/waymark/store"
)

// An edge acknowledges a takedown, loses power, and restarts cut off from
// every voter. Raft cannot replay anything until it hears from a leader,
// so the edge serves from Pebble alone: the takedown must be there. Its
// store sits on Pebble's crashable in-memory file system, and the power
// loss keeps exactly what was synced; raft's log stays on disk.
func TestTakedownSurvivesPowerLossWhilePartitioned(t *testing.T) {
	c := newCluster(t, nil)
	v1 := c.add("v1", "us")
	c.bootstrap(v1)
	fs := vfs.NewCrashableMem()
	e1 := c.addAt("e1", "eu", t.TempDir(), func(m *member) { m.storeFS = fs })
	c.onLeader("add e1", func(n *Node) error { return n.AddNonvoter("e1", e1.node().Addr()) })
	c.onLeader("claim eu", func(n *Node) error { _, _, err := n.ClaimRegion(testCtx(t), "eu"); return err })
	code := createThrough(t, e1, "https://example.com/doomed")
	c.waitLinks(code)
	// Snapshot-time durability: the create is synced, as a flush would.
	if err := e1.store().Flush(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := e1.node().UpdateLink(ctx, &store.LinkPatch{Code: code, UpdatedAt: 2, SetStatus: true, Status: store.StatusLegalBlock})
	if err != nil || l.Status != store.StatusLegalBlock {
		t.Fatalf("takedown through e1: %+v, %v", l, err)
	}
	// Once e1 serves the takedown, a power loss must not undo it. (The
	// forwarded write waits for raft's applied index, which hashicorp/raft
	// moves when it hands entries to the FSM, not when the FSM is done, so
	// poll the store itself.)
	waitFor(t, "e1 to apply the takedown", func() (bool, string) {
		got := mustGetLink(t, e1.store(), code)
		return got.Status == store.StatusLegalBlock, got.Status.String()
	})

	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	v1.stop() // the edge comes back partitioned: no voter to hear from
	e1.stop()
	e1.storeFS = crashed
	e1.start()
	if ok, _ := e1.node().Ready(); ok {
		t.Fatalf("partitioned e1 reports ready")
	}
	if got := mustGetLink(t, e1.store(), code); got.Status != store.StatusLegalBlock {
		t.Fatalf("after a power loss the partitioned edge serves %s with status %v; want %v (an acknowledged takedown came back)", code, got.Status, store.StatusLegalBlock)
	}
}
