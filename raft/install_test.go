package raft

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waymark/waymark/store"
)

// An edge that was away until the leader compacted its log catches up by
// installing a snapshot. It serves redirects from its store meanwhile:
// every code it knew before must be found by every read, from the moment
// its store opens until the snapshot is in and beyond. The old restore
// wiped the store and refilled it in place, so reads in between missed.
func TestSnapshotInstallKeepsServingKnownCodes(t *testing.T) {
	const known = 4000
	c := newCluster(t, func(cfg *Config) {
		cfg.TrailingLogs = 16
		cfg.SnapshotThreshold = 1 << 30
		cfg.SnapshotInterval = time.Hour
	})
	v1 := c.add("v1", "us")
	c.bootstrap(v1)
	e1 := c.add("e1", "eu")
	c.onLeader("add e1", func(n *Node) error { return n.AddNonvoter("e1", e1.node().Addr()) })

	codes := createMany(t, v1, known, "before")
	c.waitLinks(codes...)

	// Pause the edge; the leader moves on and compacts its log past it.
	edgeApplied := appliedIndex(t, e1.store())
	e1.stop()
	later := createMany(t, v1, 200, "later")
	if err := v1.node().Raft().Snapshot().Error(); err != nil {
		t.Fatalf("snapshot on the leader: %v", err)
	}
	first, err := v1.node().bolt.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	if first <= edgeApplied+1 {
		t.Fatalf("leader's log starts at %d, the edge needs %d: no snapshot would be sent", first, edgeApplied+1)
	}

	// Resume it while a load of known codes runs against its store.
	var (
		stop    = make(chan struct{})
		wg      sync.WaitGroup
		reads   atomic.Int64
		missMu  sync.Mutex
		misses  []string
		readers = 4
	)
	e1.onStore = func(st *store.Store) {
		for r := range readers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var l store.Link
				for i := r; ; i = (i + readers) % known {
					select {
					case <-stop:
						return
					default:
					}
					found, err := st.GetLink([]byte(codes[i]), &l)
					reads.Add(1)
					if err != nil || !found {
						missMu.Lock()
						misses = append(misses, fmt.Sprintf("%s (found %v, err %v) after %d reads", codes[i], found, err, reads.Load()))
						missMu.Unlock()
					}
				}
			}()
		}
	}
	e1.start()
	waitFor(t, "e1 to install the snapshot and catch up", func() (bool, string) {
		if n := e1.ev.restoreCount(); n == 0 {
			return false, "no snapshot installed yet"
		}
		var l store.Link
		for _, code := range later {
			if found, _ := e1.store().GetLink([]byte(code), &l); !found {
				return false, "missing " + code
			}
		}
		return true, ""
	})
	close(stop)
	wg.Wait()
	e1.onStore = nil
	if len(misses) > 0 {
		t.Fatalf("%d of %d reads of known codes missed while the edge installed a snapshot; first: %s", len(misses), reads.Load(), misses[0])
	}
	t.Logf("%d reads of %d known codes, none missed, across the snapshot install", reads.Load(), known)
	c.leader()
}

// createMany creates n links through m, 16 at a time, and returns their
// codes.
func createMany(t *testing.T, m *member, n int, tag string) []string {
	t.Helper()
	codes := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	sem := make(chan struct{}, 16)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			node := m.node()
			code, err := node.NewCode(ctx)
			if err == nil {
				l := store.Link{Code: code, URL: fmt.Sprintf("https://example.com/%s/%d", tag, i), Owner: "o1", CreatedAt: 1700000000000}
				_, _, err = node.CreateLink(ctx, &l, nil)
			}
			if err != nil {
				select {
				case errs <- err:
				default:
				}
				return
			}
			codes[i] = code
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		if !errors.Is(err, store.ErrNoLeader) {
			t.Fatalf("create through %s: %v", m.id, err)
		}
		t.Fatalf("create through %s: no leader: %v", m.id, err)
	default:
	}
	return codes
}

// While a snapshot is being installed the node reports not ready (its
// state is stale) but keeps serving the old state, and a restore that
// fails leaves that state serving and the node ready again.
func TestInstallingSnapshotIsNotReady(t *testing.T) {
	tn := newTestNode(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, err := tn.n.CreateLink(ctx, testLink("keep123"), nil); err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	go func() { errc <- tn.n.fsm.Restore(pr) }()
	waitFor(t, "not ready while installing", func() (bool, string) {
		ok, detail := tn.n.Ready()
		return !ok && strings.Contains(detail, "installing a raft snapshot"), detail
	})
	mustGetLink(t, tn.st, "keep123")
	pw.CloseWithError(errors.New("connection reset by peer"))
	if err := <-errc; err == nil {
		t.Fatalf("Restore of a broken stream succeeded")
	}
	if ok, detail := tn.n.Ready(); !ok {
		t.Fatalf("not ready after a failed restore: %s", detail)
	}
	mustGetLink(t, tn.st, "keep123")
}
