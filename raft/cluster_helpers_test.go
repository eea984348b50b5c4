package raft

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/waymark/waymark/store"
)

// waitFor polls cond until it holds or 20s pass.
func waitFor(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: gave up after 20s: %s", what, detail)
		}
		<-tick.C
	}
}

// cluster is several raft nodes in this process over real TCP on
// 127.0.0.1. Forward is wired in-process: it finds the leader's *Node by
// raft ID and calls ApplyForwarded, the real leader-side path minus the
// HTTP hop.
type cluster struct {
	t   testing.TB
	mod func(*Config)

	mu      sync.Mutex
	members map[string]*member
}

// member is one node; it can be stopped and started again on its dirs and
// its raft address.
type member struct {
	c      *cluster
	id     string
	dir    string
	cfg    Config
	st     *store.Store // nil while stopped
	n      *Node        // nil while stopped
	ev     *events
	leader *leaderLog
	// storeHook, when set, is the store's BeforeCommit fault injection.
	storeHook func() error
	// onStore, when set, runs after the store opens and before raft does.
	onStore func(*store.Store)
	// storeFS, when set, holds the store instead of the disk (raft's log
	// stays on disk).
	storeFS vfs.FS
}

// leaderLog records OnLeader calls.
type leaderLog struct {
	mu    sync.Mutex
	calls []bool
}

func (l *leaderLog) add(v bool) { l.mu.Lock(); l.calls = append(l.calls, v); l.mu.Unlock() }

func (l *leaderLog) get() []bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]bool(nil), l.calls...)
}

// fastTimeouts keep elections short without making a loaded 2-core
// machine flap: heartbeats go out every 20ms, a leader steps down after
// 200ms without a quorum.
func fastTimeouts(c *Config) {
	c.HeartbeatTimeout = 200 * time.Millisecond
	c.ElectionTimeout = 200 * time.Millisecond
}

func newCluster(t testing.TB, mod func(*Config)) *cluster {
	c := &cluster{t: t, mod: mod, members: map[string]*member{}}
	t.Cleanup(func() {
		c.mu.Lock()
		ms := make([]*member, 0, len(c.members))
		for _, m := range c.members {
			ms = append(ms, m)
		}
		c.mu.Unlock()
		for _, m := range ms {
			m.stop()
		}
	})
	return c
}

// add starts a node that has no raft state and does not bootstrap.
func (c *cluster) add(id, region string) *member {
	c.t.Helper()
	return c.addAt(id, region, c.t.TempDir(), nil)
}

// addAt is add on the data dir dir (store/ and raft/ inside it); prep
// runs on the member before it starts.
func (c *cluster) addAt(id, region, dir string, prep func(*member)) *member {
	c.t.Helper()
	m := &member{c: c, id: id, dir: dir, leader: &leaderLog{}}
	m.cfg = Config{
		NodeID:   id,
		Region:   region,
		Dir:      filepath.Join(m.dir, "raft"),
		BindAddr: "127.0.0.1:0",
		Logger:   testLogger().With("test_node", id),
		Forward:  c.forward,
		OnLeader: m.leader.add,
	}
	fastTimeouts(&m.cfg)
	if c.mod != nil {
		c.mod(&m.cfg)
	}
	if prep != nil {
		prep(m)
	}
	c.mu.Lock()
	c.members[id] = m
	c.mu.Unlock()
	m.start()
	// Restarts come back on the same address, as a node with a fixed
	// --raft-addr does.
	m.cfg.BindAddr = m.node().Addr()
	return m
}

// start opens the store and raft on the member's dirs.
func (m *member) start() {
	m.c.t.Helper()
	st, err := store.Open(filepath.Join(m.dir, "store"), store.Options{BlockCacheBytes: 8 << 20, Logger: testLogger(), BeforeCommit: m.storeHook, FS: m.storeFS})
	if err != nil {
		m.c.t.Fatalf("open store %s: %v", m.id, err)
	}
	if m.onStore != nil {
		m.onStore(st)
	}
	m.ev = newEvents()
	cfg := m.cfg
	m.ev.hook(&cfg)
	cfg.Metrics = metrics.NewSet()
	n, err := Open(cfg, st)
	if err != nil {
		st.Close()
		m.c.t.Fatalf("open raft %s: %v", m.id, err)
	}
	m.c.mu.Lock()
	m.st, m.n = st, n
	m.c.mu.Unlock()
}

// stop closes raft and the store, as a crash of the process would, except
// that Pebble gets to close cleanly.
func (m *member) stop() {
	m.c.mu.Lock()
	n, st := m.n, m.st
	m.n, m.st = nil, nil
	m.c.mu.Unlock()
	if n != nil {
		if err := n.Close(); err != nil {
			m.c.t.Errorf("close raft %s: %v", m.id, err)
		}
	}
	if st != nil {
		if err := st.Close(); err != nil {
			m.c.t.Errorf("close store %s: %v", m.id, err)
		}
	}
}

func (m *member) node() *Node {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	return m.n
}

func (m *member) store() *store.Store {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	return m.st
}

func (c *cluster) forward(ctx context.Context, leaderID, _ string, cmd []byte) ([]byte, error) {
	c.mu.Lock()
	var n *Node
	if m := c.members[leaderID]; m != nil {
		n = m.n
	}
	c.mu.Unlock()
	if n == nil {
		return nil, fmt.Errorf("cannot reach leader %s: connection refused: %w", leaderID, store.ErrNoLeader)
	}
	return n.ApplyForwarded(ctx, cmd)
}

// live returns the running members, sorted by ID.
// threeVoters adds voters v1 (us), v2 (eu) and v3 (ap), bootstraps them,
// and returns the three, the leader and one follower.
func (c *cluster) threeVoters() (voters []*member, leader, follower *member) {
	c.t.Helper()
	voters = []*member{c.add("v1", "us"), c.add("v2", "eu"), c.add("v3", "ap")}
	leader = c.bootstrap(voters...)
	for _, m := range voters {
		if m != leader {
			return voters, leader, m
		}
	}
	panic("BUG: three voters and no follower")
}

func (c *cluster) live() []*member {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*member
	for _, m := range c.members {
		if m.n != nil {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// bootstrap has every voter call BootstrapCluster with the same list, as
// --bootstrap-expect does, and waits for a leader every voter agrees on.
func (c *cluster) bootstrap(voters ...*member) *member {
	c.t.Helper()
	var servers []Server
	for _, v := range voters {
		servers = append(servers, Server{ID: v.id, Address: v.node().Addr(), Voter: true})
	}
	errs := make(chan error, len(voters))
	for i, v := range voters {
		// Each voter lists the servers in its own order; the node sorts.
		list := append(append([]Server(nil), servers[i:]...), servers[:i]...)
		go func() { errs <- v.node().BootstrapCluster(list) }()
	}
	for range voters {
		if err := <-errs; err != nil {
			c.t.Fatalf("bootstrap cluster: %v", err)
		}
	}
	return c.leader()
}

// leader waits until one live member leads and every live member is ready
// and agrees on it.
func (c *cluster) leader() *member {
	c.t.Helper()
	var leader *member
	waitFor(c.t, "a leader every live node agrees on", func() (bool, string) {
		leader = nil
		for _, m := range c.live() {
			n := m.node()
			if n.IsLeader() {
				leader = m
			}
			if ok, detail := n.Ready(); !ok {
				return false, m.id + ": " + detail
			}
		}
		if leader == nil {
			return false, "no leader"
		}
		for _, m := range c.live() {
			if id := m.node().Stats().LeaderID; id != leader.id {
				return false, fmt.Sprintf("%s follows %q; %s leads", m.id, id, leader.id)
			}
		}
		return true, ""
	})
	return leader
}

// onLeader runs op against the current leader, retrying while leadership
// is moving (ErrNoLeader means op never started).
func (c *cluster) onLeader(what string, op func(*Node) error) {
	c.t.Helper()
	var err error
	waitFor(c.t, what, func() (bool, string) {
		var leader *Node
		for _, m := range c.live() {
			if n := m.node(); n.IsLeader() {
				leader = n
			}
		}
		if leader == nil {
			return false, "no leader"
		}
		err = op(leader)
		if errors.Is(err, store.ErrNoLeader) {
			return false, err.Error()
		}
		return true, ""
	})
	if err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
}

// waitApplied waits until every live store holds the links of codes.
func (c *cluster) waitLinks(codes ...string) {
	c.t.Helper()
	for _, m := range c.live() {
		st := m.store()
		waitFor(c.t, m.id+" to apply every link", func() (bool, string) {
			var l store.Link
			for _, code := range codes {
				if found, err := st.GetLink([]byte(code), &l); err != nil || !found {
					return false, fmt.Sprintf("%s lacks %s (err %v)", m.id, code, err)
				}
			}
			return true, ""
		})
	}
}

// waitCaughtUp waits until every live store has applied the leader's
// applied index as of now.
func (c *cluster) waitCaughtUp() {
	c.t.Helper()
	target := appliedIndex(c.t, c.leader().store())
	for _, m := range c.live() {
		st := m.store()
		waitFor(c.t, m.id+" to catch up", func() (bool, string) {
			got := appliedIndex(c.t, st)
			return got >= target, fmt.Sprintf("%s applied %d of %d", m.id, got, target)
		})
	}
}

// servers returns a node's view of the configuration as id -> voter.
func servers(t testing.TB, n *Node) map[string]bool {
	t.Helper()
	list, err := n.Servers()
	if err != nil {
		t.Fatalf("servers: %v", err)
	}
	out := map[string]bool{}
	for _, s := range list {
		out[s.ID] = s.Voter
	}
	return out
}

// createThrough makes a generated-code link through m, retrying while the
// cluster has no leader.
func createThrough(t testing.TB, m *member, url string) string {
	t.Helper()
	var code string
	waitFor(t, "a create through "+m.id, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n := m.node()
		var err error
		if code, err = n.NewCode(ctx); err != nil {
			return false, err.Error()
		}
		l := store.Link{Code: code, URL: url, Owner: "o1", CreatedAt: 1700000000000}
		_, _, err = n.CreateLink(ctx, &l, nil)
		if errors.Is(err, store.ErrNoLeader) {
			return false, err.Error()
		}
		if err != nil {
			t.Fatalf("create through %s: %v", m.id, err)
		}
		return true, ""
	})
	return code
}
