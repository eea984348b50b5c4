package raft

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/waymark/waymark/store"
)

// httpForward is Config.Forward over real HTTP on loopback, the way
// node's forwarding client and leader handler do it: the leader answers
// within the LeaderTimeoutHeader the forwarding node sent.
func httpForward(t *testing.T, leader func() *Node) func(context.Context, string, string, []byte) ([]byte, error) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cmd, _ := io.ReadAll(r.Body)
		timeout := ParseLeaderTimeout([]byte(r.Header.Get(LeaderTimeoutHeader)), leader().cfg.ApplyTimeout)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		ans, err := leader().ApplyForwarded(ctx, cmd)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Write(ans)
	}))
	t.Cleanup(srv.Close)
	return func(ctx context.Context, _, _ string, cmd []byte) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader(cmd))
		if err != nil {
			return nil, err
		}
		if d, ok := LeaderTimeout(ctx); ok {
			req.Header.Set(LeaderTimeoutHeader, FormatLeaderTimeout(d))
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", store.ErrUnknownOutcome, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%w: status %d: %v", store.ErrUnknownOutcome, resp.StatusCode, err)
		}
		return b, nil
	}
}

// slowLeaderCluster is a leader and a forwarding non-voter; writes through
// the non-voter cross real HTTP.
func slowLeaderCluster(t *testing.T, applyTimeout time.Duration) (leader, edge *member) {
	t.Helper()
	var c *cluster
	c = newCluster(t, func(cfg *Config) {
		cfg.ApplyTimeout = applyTimeout
		cfg.Forward = httpForward(t, func() *Node {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.members["v1"].n
		})
	})
	v1 := c.add("v1", "us")
	c.bootstrap(v1)
	e1 := c.add("e1", "us")
	c.onLeader("add e1", func(n *Node) error { return n.AddNonvoter("e1", e1.node().Addr()) })
	waitFor(t, "e1 to follow v1", func() (bool, string) {
		ok, detail := e1.node().Ready()
		return ok && e1.node().Stats().LeaderID == "v1", detail
	})
	return v1, e1
}

// hold blocks m's FSM when it applies code until the returned release runs
// (also at the end of the test).
func hold(t *testing.T, m *member, code string) (release func()) {
	gate := make(chan struct{})
	release = sync.OnceFunc(func() { close(gate) })
	m.ev.setGate(func(c string) {
		if c == code {
			<-gate
		}
	})
	t.Cleanup(release)
	return release
}

// A leader whose apply cannot finish in time answers "unknown outcome"
// itself, and that answer reaches the forwarding node before the node's
// own deadline: the leader was given less time than the node waits.
func TestForwardLeaderAnswersBeforeEdgeDeadline(t *testing.T) {
	const applyTimeout = 2500 * time.Millisecond
	leader, edge := slowLeaderCluster(t, applyTimeout)
	hold(t, leader, "slow001")

	// The edge's write deadline, as edge.Server.writeContext sets it.
	ctx, cancel := context.WithTimeout(context.Background(), applyTimeout)
	defer cancel()
	_, _, err := edge.node().CreateLink(ctx, testLink("slow001"), nil)
	var remote *remoteError
	if !errors.Is(err, store.ErrUnknownOutcome) || !errors.As(err, &remote) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("create through the edge with a stuck leader: got %v; want the leader's own unknown-outcome answer, not the edge's timeout", err)
	}
	if ctx.Err() != nil {
		t.Errorf("the answer came after the edge's deadline")
	}
}

// A forwarded write returns only once this node's store holds it. raft's
// own applied index moves when an entry is queued for the FSM, before it
// is in Pebble, so waiting on it answers too early.
func TestForwardWaitsForLocalStore(t *testing.T) {
	leader, edge := slowLeaderCluster(t, 5*time.Second)
	ctx := testCtx(t)
	// Hold the edge's FSM on an earlier entry, so the next one queues.
	release := hold(t, edge, "hold001")
	if _, _, err := leader.node().CreateLink(ctx, testLink("hold001"), nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "e1's FSM to block on hold001", func() (bool, string) {
		return edge.node().raft.AppliedIndex() >= leader.node().raft.AppliedIndex(), "behind"
	})

	done := make(chan error, 1)
	go func() {
		_, _, err := edge.node().CreateLink(ctx, testLink("next001"), nil)
		done <- err
	}()
	// Once raft on the edge counts next001 as applied, give a wrong
	// answer time to come back, then let the FSM go on.
	waitFor(t, "next001 committed and queued on e1", func() (bool, string) {
		var l store.Link
		found, _ := leader.store().GetLink([]byte("next001"), &l)
		return found && edge.node().raft.AppliedIndex() >= l.Index, "not yet"
	})
	var err error
	returned := false
	select {
	case err = <-done:
		returned = true
	case <-time.After(300 * time.Millisecond):
	}
	var l store.Link
	found, _ := edge.store().GetLink([]byte("next001"), &l)
	if returned && !found {
		t.Fatalf("create through e1 returned (err %v) before e1's store held the link", err)
	}
	release()
	if !returned {
		err = <-done
	}
	if err != nil {
		t.Fatalf("create through e1: %v", err)
	}
	if found, _ := edge.store().GetLink([]byte("next001"), &l); !found {
		t.Fatalf("create through e1 returned before e1's store held the link")
	}
	if n := edge.node().m.forwardApplyWaitTimeouts.Get(); n != 0 {
		t.Errorf("apply-wait timeouts: got %d; want 0 (the FSM's signal ends the wait)", n)
	}
}
