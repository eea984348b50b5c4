package raft

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/waymark/waymark/store"
)

func testLogger() *slog.Logger {
	if os.Getenv("WAYMARK_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func openStore(t testing.TB, dir string) *store.Store {
	t.Helper()
	st, err := store.Open(dir, store.Options{BlockCacheBytes: 8 << 20, Logger: testLogger()})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	return st
}

// events counts the FSM's callbacks.
type events struct {
	mu       sync.Mutex
	changes  map[string]int
	sites    []store.Site
	restores int
	// gate, if set, runs first in OnChange, on raft's FSM goroutine: a
	// test holds the FSM there to make this node's applies slow.
	gate func(code string)
}

// setGate installs gate; nil removes it.
func (e *events) setGate(gate func(code string)) { e.mu.Lock(); e.gate = gate; e.mu.Unlock() }

func newEvents() *events { return &events{changes: map[string]int{}} }

func (e *events) hook(c *Config) {
	c.OnChange = func(code string) {
		e.mu.Lock()
		gate := e.gate
		e.mu.Unlock()
		if gate != nil {
			gate(code)
		}
		e.mu.Lock()
		e.changes[code]++
		e.mu.Unlock()
	}
	c.OnSite = func(s store.Site) { e.mu.Lock(); e.sites = append(e.sites, s); e.mu.Unlock() }
	c.OnRestore = func() { e.mu.Lock(); e.restores++; e.mu.Unlock() }
}

func (e *events) changeCount(code string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.changes[code]
}

func (e *events) totalChanges() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, c := range e.changes {
		n += c
	}
	return n
}

func (e *events) restoreCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.restores
}

// testNode is one node with its own store, reopenable on the same dirs.
type testNode struct {
	t     testing.TB
	dir   string
	cfg   Config
	st    *store.Store
	n     *Node
	ev    *events
	ready bool
}

func newTestNode(t testing.TB, mod func(*Config)) *testNode {
	t.Helper()
	dir := t.TempDir()
	tn := &testNode{t: t, dir: dir, ev: newEvents()}
	tn.cfg = Config{
		NodeID:           "n1",
		Region:           "us",
		Dir:              filepath.Join(dir, "raft"),
		BindAddr:         "127.0.0.1:0",
		Bootstrap:        true,
		HeartbeatTimeout: 100 * time.Millisecond,
		ElectionTimeout:  100 * time.Millisecond,
		Logger:           testLogger(),
	}
	tn.ev.hook(&tn.cfg)
	if mod != nil {
		mod(&tn.cfg)
	}
	tn.st = openStore(t, filepath.Join(dir, "store"))
	tn.open()
	t.Cleanup(tn.shutdown)
	return tn
}

// open starts raft on the current store and waits until it is ready.
func (tn *testNode) open() {
	tn.t.Helper()
	n, err := Open(tn.cfg, tn.st)
	if err != nil {
		tn.t.Fatalf("open raft: %v", err)
	}
	tn.n = n
	if !tn.cfg.Bootstrap {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		tn.t.Fatalf("wait ready: %v", err)
	}
}

// restart closes raft (not the store) and opens it again with fresh
// callbacks, so counts reflect only the new life.
func (tn *testNode) restart() {
	tn.t.Helper()
	if err := tn.n.Close(); err != nil {
		tn.t.Fatalf("close raft: %v", err)
	}
	tn.ev = newEvents()
	tn.ev.hook(&tn.cfg)
	tn.open()
}

func (tn *testNode) shutdown() {
	if tn.n != nil {
		if err := tn.n.Close(); err != nil {
			tn.t.Errorf("close raft: %v", err)
		}
	}
	if tn.st != nil {
		if err := tn.st.Close(); err != nil {
			tn.t.Errorf("close store: %v", err)
		}
		tn.st = nil
	}
}

// dump returns every key and value of a store as one byte string.
func dump(t testing.TB, st *store.Store) []byte {
	t.Helper()
	v := st.View()
	defer v.Release()
	var buf bytes.Buffer
	if _, err := v.WriteTo(&buf); err != nil {
		t.Fatalf("dump store: %v", err)
	}
	return buf.Bytes()
}

func testLink(code string) *store.Link {
	return &store.Link{Code: code, URL: "https://example.com/" + code, Owner: "o1", CreatedAt: 1700000000000, Redirect: 302}
}

func mustGetLink(t testing.TB, st *store.Store, code string) store.Link {
	t.Helper()
	var l store.Link
	found, err := st.GetLink([]byte(code), &l)
	if err != nil || !found {
		t.Fatalf("get link %q: found %v, err %v; want found", code, found, err)
	}
	return l
}

// memSink is an in-memory raft snapshot sink.
type memSink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { s.closed = true; return nil }

var _ hraft.SnapshotSink = (*memSink)(nil)
