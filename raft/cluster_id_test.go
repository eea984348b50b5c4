package raft

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/waymark/waymark/store"
)

// Every store knows the cluster whose log it holds: the first leader sets
// the id, every replica and every snapshot carries it, and restarts keep it.
func TestClusterIDIsReplicated(t *testing.T) {
	c := newCluster(t, nil)
	v1, v2, v3 := c.add("v1", "us"), c.add("v2", "us"), c.add("v3", "eu")
	c.bootstrap(v1, v2, v3)
	createThrough(t, v1, "https://example.com/one")
	c.waitCaughtUp()
	want := clusterID(t, v1.store())
	if !validClusterID(want) {
		t.Fatalf("cluster id %q is not a valid id", want)
	}
	for _, m := range c.live() {
		if got := clusterID(t, m.store()); got != want {
			t.Fatalf("%s holds cluster id %q; want %q", m.id, got, want)
		}
	}
	v1.stop()
	v1.start()
	c.leader()
	createThrough(t, v2, "https://example.com/two")
	c.waitCaughtUp()
	for _, m := range c.live() {
		if got := clusterID(t, m.store()); got != want {
			t.Fatalf("after a restart %s holds cluster id %q; want %q", m.id, got, want)
		}
	}
}

func clusterID(t *testing.T, st *store.Store) string {
	t.Helper()
	id, found, err := st.ClusterID()
	if err != nil || !found {
		t.Fatalf("cluster id: %q, found %v, err %v", id, found, err)
	}
	return id
}

// A node whose store comes from another cluster (its raft dir gone, its
// Pebble dir kept) and is added to a new cluster must not take the new
// cluster's entries for ones it already holds. Before cluster ids it
// skipped every entry up to its old applied index, silently, and reported
// ready with another cluster's links. It now refuses, with a clear error,
// and the new cluster is not disturbed.
func TestStoreOfAnotherClusterRefusesToJoin(t *testing.T) {
	a := newCluster(t, nil)
	a1 := a.add("a1", "us")
	a.bootstrap(a1)
	for i := range 40 {
		createThrough(t, a1, fmt.Sprintf("https://example.com/a/%d", i))
	}
	aApplied := appliedIndex(t, a1.store())
	dir := a1.dir
	a1.stop()
	if err := os.RemoveAll(a1.cfg.Dir); err != nil { // the raft dir only
		t.Fatal(err)
	}

	b := newCluster(t, nil)
	b1 := b.add("b1", "us")
	b.bootstrap(b1)
	var bCodes []string
	for i := range 5 {
		bCodes = append(bCodes, createThrough(t, b1, fmt.Sprintf("https://example.com/b/%d", i)))
	}
	if bApplied := appliedIndex(t, b1.store()); bApplied >= aApplied {
		t.Fatalf("cluster b is at %d, not below the foreign store's %d: the test would not exercise skipping", bApplied, aApplied)
	}

	x := b.addAt("x1", "us", dir, nil)
	b.onLeader("add x1", func(n *Node) error { return n.AddNonvoter("x1", x.node().Addr()) })
	waitFor(t, "x1 to refuse cluster b's log", func() (bool, string) {
		ok, detail := x.node().Ready()
		if ok {
			return false, "x1 is ready"
		}
		return strings.Contains(detail, store.ErrOtherCluster.Error()), detail
	})
	_, detail := x.node().Ready()
	t.Logf("x1: %s", detail)
	var l store.Link
	for _, code := range bCodes {
		if found, _ := x.store().GetLink([]byte(code), &l); found {
			t.Fatalf("x1 applied cluster b's %s", code)
		}
	}
	// Cluster b goes on without it.
	code := createThrough(t, b1, "https://example.com/b/after")
	if found, err := b1.store().GetLink([]byte(code), &l); err != nil || !found {
		t.Fatalf("b1 lacks %s after x1 refused: %v", code, err)
	}
}

// A raft dir remembers its cluster. Started over a store of another
// cluster whose applied index is past the raft dir's snapshot, raft would
// replay only the entries after the store's index (the entry naming the
// cluster is compacted away) and serve the other cluster's links. Open
// refuses instead.
func TestRaftDirOfAnotherClusterRefusesToStart(t *testing.T) {
	compact := func(cfg *Config) {
		cfg.TrailingLogs = 2
		cfg.SnapshotThreshold = 1 << 30
		cfg.SnapshotInterval = time.Hour
	}
	b := newCluster(t, compact)
	b1 := b.add("b1", "us")
	b.bootstrap(b1)
	for i := range 5 {
		createThrough(t, b1, fmt.Sprintf("https://example.com/b/%d", i))
	}
	if err := b1.node().Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	first, err := b1.node().bolt.FirstIndex()
	if err != nil || first <= 4 {
		t.Fatalf("b1's log starts at %d (%v); want the set_cluster_id entry compacted away", first, err)
	}
	bRaft := b1.cfg.Dir
	b1.stop()

	a := newCluster(t, nil)
	a1 := a.add("a1", "us")
	a.bootstrap(a1)
	for i := range 20 {
		createThrough(t, a1, fmt.Sprintf("https://example.com/a/%d", i))
	}
	a1.stop()

	st := openStore(t, filepath.Join(a1.dir, "store"))
	defer st.Close()
	cfg := b1.cfg
	cfg.Logger = testLogger()
	cfg.Dir = bRaft
	n, err := Open(cfg, st)
	if err == nil {
		n.Close()
		t.Fatalf("raft started over a store of another cluster")
	}
	if !errors.Is(err, store.ErrOtherCluster) {
		t.Fatalf("Open over a store of another cluster: %v; want ErrOtherCluster", err)
	}
	t.Logf("Open: %v", err)
}
