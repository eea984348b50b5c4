package node

import (
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// testCluster runs real nodes in this process: real Pebble, Raft over TCP,
// memberlist gossip and HTTP, all on 127.0.0.1 with ports from the OS.
type testCluster struct {
	t       *testing.T
	keyFile string
	stops   map[*Node]func()
}

func newTestCluster(t *testing.T) *testCluster {
	t.Helper()
	key := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	keyFile := filepath.Join(t.TempDir(), "cluster-key")
	if err := os.WriteFile(keyFile, []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	return &testCluster{t: t, keyFile: keyFile, stops: map[*Node]func(){}}
}

// start runs `waymark node` with these flags in-process and stops it when
// the test ends.
func (c *testCluster) start(name string, args ...string) *Node {
	c.t.Helper()
	full := append([]string{"--name", name, "--cluster-key-file", c.keyFile, "--data-dir", filepath.Join(c.t.TempDir(), name),
		"--http-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0"}, args...)
	cfg, _, err := ParseFlagsOutput(full, io.Discard)
	if err != nil {
		c.t.Fatalf("flags of %s: %v", name, err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("test_node", name)
	}
	n, err := Start(context.Background(), cfg, log)
	if err != nil {
		c.t.Fatalf("start %s: %v", name, err)
	}
	stop := sync.OnceFunc(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		n.Close(ctx)
	})
	c.stops[n] = stop
	c.t.Cleanup(stop)
	return n
}

// stop closes n as a clean shutdown would; the cleanup then skips it.
func (c *testCluster) stop(n *Node) { c.stops[n]() }

// voters returns n's raft configuration as id -> voter.
func voters(t *testing.T, n *Node) map[string]bool {
	t.Helper()
	servers, err := n.raft.Servers()
	if err != nil {
		t.Fatalf("servers: %v", err)
	}
	out := map[string]bool{}
	for _, s := range servers {
		out[s.ID] = s.Voter
	}
	return out
}

func voterCount(t *testing.T, n *Node) int {
	t.Helper()
	c := 0
	for _, v := range voters(t, n) {
		if v {
			c++
		}
	}
	return c
}

// gossipStatus is what n's gossip says of member name.
func gossipStatus(n *Node, name string) string {
	for _, m := range n.gossip.Members() {
		if m.Name == name {
			return m.Status
		}
	}
	return ""
}

// leaderOf waits until one of nodes leads and returns it.
func leaderOf(t *testing.T, nodes ...*Node) *Node {
	t.Helper()
	var leader *Node
	waitUntil(t, "a leader", 30*time.Second, func() bool {
		for _, n := range nodes {
			if n.raft.IsLeader() {
				leader = n
				return true
			}
		}
		return false
	})
	return leader
}
