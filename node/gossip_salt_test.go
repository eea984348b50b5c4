package node

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
)

// constReader yields one byte value forever: salts made from it are the
// highest (0xff) or lowest (0x00) possible, so a vote by value would
// always go one way.
type constReader byte

func (r constReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

var _ io.Reader = constReader(0)

func openTestSalts(t *testing.T, dir string, fill byte) *ingest.LocalSalts {
	t.Helper()
	s, err := ingest.OpenLocalSalts(ingest.SaltOptions{Path: filepath.Join(dir, SaltFile), Rand: constReader(fill)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func startSaltGossip(t *testing.T, name, addr string, salts *ingest.LocalSalts) *Gossip {
	t.Helper()
	g, err := StartGossip(GossipConfig{
		BindAddr: addr, SecretKey: []byte("0123456789abcdef0123456789abcdef"),
		Meta:   Meta{Name: name, Region: "us", Roles: []Role{RoleEdge}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Salts:  salts,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Shutdown() })
	return g
}

// TestGossipRestartedNodeTakesClusterSalt: three real memberlist nodes on
// loopback share the salt node a made first. Node c restarts with its
// salt file deleted: with the start-up hold it hashes with the cluster's
// salt from its first event; when the hold ran out and it made a fresh
// salt (here the lowest possible value, which a lowest-value vote would
// pick), it still ends with the cluster's salt, and a and b never change.
func TestGossipRestartedNodeTakesClusterSalt(t *testing.T) {
	root := t.TempDir()
	dirs := map[string]string{}
	for _, n := range []string{"a", "b", "c"} {
		dirs[n] = filepath.Join(root, n)
		if err := os.Mkdir(dirs[n], 0o700); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	sa := openTestSalts(t, dirs["a"], 0xff)
	cluster := sa.Salt(now) // made first: the cluster's salt
	time.Sleep(2 * time.Millisecond)
	ga := startSaltGossip(t, "a", "127.0.0.1:0", sa)
	sb := openTestSalts(t, dirs["b"], 0x11)
	sb.Salt(now)
	gb := startSaltGossip(t, "b", "127.0.0.1:0", sb)
	sc := openTestSalts(t, dirs["c"], 0x22)
	gc := startSaltGossip(t, "c", "127.0.0.1:0", sc)
	for _, g := range []*Gossip{gb, gc} {
		if _, err := g.Join([]string{ga.Addr()}); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "one salt on all three", 10*time.Second, func() bool {
		return sb.Salt(now) == cluster && sc.Salt(now) == cluster
	})

	// Watch a and b for the rest of the test: their salt must never move.
	var moved atomic.Value
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			for name, s := range map[string]*ingest.LocalSalts{"a": sa, "b": sb} {
				if got := s.Salt(now); got != cluster {
					moved.Store(fmt.Sprintf("%s took %x", name, got))
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	defer func() {
		close(stop)
		<-watched
		if m := moved.Load(); m != nil {
			t.Errorf("the cluster's salt was replaced: %s", m)
		}
	}()

	restartC := func(hold bool) *ingest.LocalSalts {
		t.Helper()
		addr := gc.Addr()
		if err := gc.Shutdown(); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(dirs["c"], SaltFile)); err != nil {
			t.Fatal(err)
		}
		s := openTestSalts(t, dirs["c"], 0x00)
		if hold {
			if !s.HoldForPeers(10 * time.Second) {
				t.Fatal("c has no salt for today but does not hold")
			}
		} else {
			s.Salt(time.Now()) // the wait ran out: a fresh salt, made now, value 00..00
		}
		gc = startSaltGossip(t, "c", addr, s)
		if _, err := gc.Join([]string{ga.Addr()}); err != nil {
			t.Fatal(err)
		}
		return s
	}

	t.Run("with the start-up hold", func(t *testing.T) {
		s := restartC(true)
		got := make(chan [16]byte, 1)
		go func() { got <- s.Salt(now) }() // c's first event
		select {
		case salt := <-got:
			if salt != cluster {
				t.Fatalf("c hashed its first event with %x; want the cluster's salt %x", salt, cluster)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("c's first event still waits for a salt")
		}
	})
	t.Run("after the hold ran out", func(t *testing.T) {
		s := restartC(false)
		waitUntil(t, "c back on the cluster's salt", 20*time.Second, func() bool { return s.Salt(now) == cluster })
		// Let another exchange or two happen between a, b and c.
		deadline := time.Now().Add(500 * time.Millisecond)
		for time.Now().Before(deadline) {
			ga.MergeRemoteState(gc.LocalState(false), false)
			gb.MergeRemoteState(gc.LocalState(false), false)
			time.Sleep(20 * time.Millisecond)
		}
		if s.Salt(now) != cluster {
			t.Fatal("c left the cluster's salt again")
		}
	})
	b, err := os.ReadFile(filepath.Join(dirs["c"], SaltFile))
	if err != nil || len(b) == 0 {
		t.Fatalf("c's salt file: %v; want the cluster's salt on disk", err)
	}
}
