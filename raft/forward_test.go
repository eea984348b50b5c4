package raft

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/waymark/waymark/store"
)

func TestApplyForwardedOnLeader(t *testing.T) {
	tn := newTestNode(t, nil)
	ctx := testCtx(t)

	ans, err := tn.n.ApplyForwarded(ctx, appendCreateLink(nil, testLink("fwd0001"), nil))
	if err != nil {
		t.Fatalf("apply forwarded create: %v", err)
	}
	res, err := decodeResult(ans)
	if err != nil || res.Err != nil || res.Index == 0 || res.Link.Code != "fwd0001" || res.Link.Index != res.Index {
		t.Fatalf("answer: got %+v, %v; want the created link at its index", res, err)
	}
	if got := mustGetLink(t, tn.st, "fwd0001"); got.Index != res.Index {
		t.Errorf("stored index: got %d; want %d", got.Index, res.Index)
	}

	ans, err = tn.n.ApplyForwarded(ctx, appendCreateLink(nil, testLink("fwd0001"), nil))
	if err != nil {
		t.Fatalf("apply forwarded duplicate: %v", err)
	}
	if res, err := decodeResult(ans); err != nil || !errors.Is(res.Err, store.ErrCodeTaken) {
		t.Errorf("duplicate code: got %+v, %v; want ErrCodeTaken in the answer", res, err)
	}

	if ans, err := tn.n.ApplyForwarded(ctx, appendAllocBlock(nil, "eu", 100)); err != nil {
		t.Fatalf("apply forwarded block: %v", err)
	} else if res, err := decodeResult(ans); err != nil || !errors.Is(res.Err, store.ErrRegionUnclaimed) {
		t.Errorf("block in an unclaimed region: got %+v, %v; want ErrRegionUnclaimed in the answer", res, err)
	}
	if _, err := tn.n.ApplyForwarded(ctx, appendClaimRegion(nil, "eu")); err != nil {
		t.Fatalf("apply forwarded claim: %v", err)
	}
	ans, err = tn.n.ApplyForwarded(ctx, appendAllocBlock(nil, "eu", 100))
	if err != nil {
		t.Fatalf("apply forwarded block: %v", err)
	}
	if res, err := decodeResult(ans); err != nil || res.Block.Len() != 100 {
		t.Errorf("block: got %+v, %v; want 100 IDs", res, err)
	}

	for name, cmd := range map[string][]byte{
		"empty":        nil,
		"garbage":      []byte{1, 1, 0, 0xff},
		"unknown type": {222, 1, flagSkippable},
		"set secret":   appendSetSecret(nil, []byte("0123456789abcdef")),
	} {
		ans, err := tn.n.ApplyForwarded(ctx, cmd)
		if !errors.Is(err, store.ErrCorrupt) || ans != nil {
			t.Errorf("%s: got %x, %v; want no answer and ErrCorrupt", name, ans, err)
		}
	}
}

// forwardingFollower is a node that knows no leader, with Forward stubbed.
func forwardingFollower(t *testing.T, forward func(context.Context, string, string, []byte) ([]byte, error)) *Node {
	t.Helper()
	tn := newTestNode(t, func(c *Config) { c.Bootstrap = false; c.Forward = forward })
	return tn.n
}

func TestForwardMapsOutcomes(t *testing.T) {
	var answer []byte
	var fail error
	calls := atomic.Int32{}
	n := forwardingFollower(t, func(_ context.Context, leaderID, addr string, cmd []byte) ([]byte, error) {
		calls.Add(1)
		if leaderID != "leader-1" || addr != "10.0.0.1:7000" || len(cmd) == 0 {
			t.Errorf("Forward(%q, %q, %d bytes); want leader-1, its address and a command", leaderID, addr, len(cmd))
		}
		return answer, fail
	})
	ctx := testCtx(t)
	cmd := appendCreateLink(nil, testLink("abc1234"), nil)

	// With no leader known, nothing is sent.
	if _, _, err := n.CreateLink(ctx, testLink("abc1234"), nil); !errors.Is(err, store.ErrNoLeader) || calls.Load() != 0 {
		t.Errorf("no leader known: got %v after %d calls; want ErrNoLeader without calling Forward", err, calls.Load())
	}

	taken := appendResult(nil, &applyResult{Index: 5, Err: store.ErrCodeTaken})
	cases := []struct {
		name   string
		answer []byte
		fail   error
		want   []error
	}{
		{"sentinel text without the sentinel", nil, errors.New("dial: " + store.ErrNoLeader.Error()), []error{store.ErrUnknownOutcome}},
		{"no leader", nil, errors.Join(store.ErrNoLeader, errors.New("connection refused")), []error{store.ErrNoLeader}},
		{"lost after sending", nil, errors.Join(store.ErrUnknownOutcome, errors.New("EOF")), []error{store.ErrUnknownOutcome}},
		{"unclassified transport error", nil, errors.New("tls: bad record"), []error{store.ErrUnknownOutcome}},
		{"garbled answer", []byte{9, 9, 9}, nil, []error{store.ErrUnknownOutcome, store.ErrCorrupt}},
		{"leader refused", taken, nil, []error{store.ErrCodeTaken}},
	}
	for _, tc := range cases {
		answer, fail = tc.answer, tc.fail
		_, err := n.forwardTo(ctx, "leader-1", "10.0.0.1:7000", cmd)
		for _, want := range tc.want {
			if !errors.Is(err, want) {
				t.Errorf("%s: got %v; want it to wrap %v", tc.name, err, want)
			}
		}
		if tc.name == "leader refused" && !strings.Contains(err.Error(), "leader-1") {
			t.Errorf("%s: got %q; want the leader named", tc.name, err)
		}
	}

	// A leader that turned the command away before its log: no effect, so
	// never an unknown outcome.
	for _, want := range []error{store.ErrRefused, store.ErrClusterKeyMismatch} {
		answer, fail = nil, fmt.Errorf("cannot forward to leader: %w: answered 4xx", want)
		_, err := n.forwardTo(ctx, "leader-1", "10.0.0.1:7000", cmd)
		if !errors.Is(err, want) || errors.Is(err, store.ErrUnknownOutcome) {
			t.Errorf("transport reports %v: got %v; want it kept, without an unknown outcome", want, err)
		}
	}
	// The transport is told how long the leader may take: less than the
	// caller waits, by ForwardSlack.
	var granted time.Duration
	var grantedOK bool
	n.cfg.Forward = func(ctx context.Context, _, _ string, _ []byte) ([]byte, error) {
		granted, grantedOK = LeaderTimeout(ctx)
		return appendResult(nil, &applyResult{Index: 1}), nil
	}
	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := n.forwardTo(short, "leader-1", "10.0.0.1:7000", cmd); err != nil {
		t.Fatalf("forward: %v", err)
	}
	if !grantedOK || granted <= 0 || granted > 3*time.Second-ForwardSlack {
		t.Errorf("leader timeout for a caller with 3s left: got %v (set %v); want at most %v", granted, grantedOK, 3*time.Second-ForwardSlack)
	}
}

func TestNodeWithoutStateWaitsToBeAdded(t *testing.T) {
	var leaderCalls atomic.Int32
	tn := newTestNode(t, func(c *Config) {
		c.Bootstrap = false
		c.OnLeader = func(bool) { leaderCalls.Add(1) }
	})
	n := tn.n
	ok, detail := n.Ready()
	if ok || !strings.Contains(detail, "no leader yet") || !strings.Contains(detail, "waiting to be added") {
		t.Errorf("ready: got %v %q; want false, no leader yet, waiting to be added", ok, detail)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := n.WaitReady(ctx); err == nil || !strings.Contains(err.Error(), "waiting to be added") {
		t.Errorf("wait ready: got %v; want the reason", err)
	}
	for name, err := range map[string]error{
		"add non-voter": n.AddNonvoter("e1", "127.0.0.1:1"),
		"add voter":     n.AddVoter("v2", "127.0.0.1:2"),
		"remove":        n.RemoveServer("v2"),
		"transfer":      n.TransferLeadership(""),
	} {
		if !errors.Is(err, store.ErrNoLeader) {
			t.Errorf("%s on a node that is not the leader: got %v; want ErrNoLeader", name, err)
		}
	}
	if servers, err := n.Servers(); err != nil || len(servers) != 0 {
		t.Errorf("servers: got %+v, %v; want none", servers, err)
	}
	if s := n.Stats(); s.Servers != 0 || s.Voter || s.Ready {
		t.Errorf("stats: got %+v; want no servers, no vote, not ready", s)
	}
	if !n.LastContact().IsZero() || !n.lastContactOrStart().Equal(n.started) {
		t.Errorf("last contact: got %v; want zero, and the gauge counting from the start", n.LastContact())
	}
	for _, bad := range [][]Server{
		nil,
		{{ID: "other", Address: "127.0.0.1:1", Voter: true}},
		{{ID: "n1", Address: n.Addr(), Voter: false}},
		{{ID: "n1", Address: n.Addr(), Voter: true}, {ID: "n1", Address: "127.0.0.1:1", Voter: true}},
		{{ID: "n1", Address: "", Voter: true}},
	} {
		if err := n.BootstrapCluster(bad); err == nil {
			t.Errorf("bootstrap with %+v: got nil error; want one", bad)
		}
	}
	if leaderCalls.Load() != 0 {
		t.Errorf("OnLeader: got %d calls; want 0", leaderCalls.Load())
	}
}

func TestBootstrapClusterSingleVoterAndAgain(t *testing.T) {
	var became atomic.Int32
	tn := newTestNode(t, func(c *Config) {
		c.Bootstrap = false
		c.OnLeader = func(leader bool) {
			if leader {
				became.Add(1)
			}
		}
	})
	n := tn.n
	self := []Server{{ID: "n1", Address: n.Addr(), Voter: true}}
	if err := n.BootstrapCluster(self); err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	if err := n.WaitReady(testCtx(t)); err != nil {
		t.Fatalf("wait ready: %v", err)
	}
	if err := n.BootstrapCluster(self); err != nil {
		t.Errorf("bootstrap over existing state: got %v; want nil", err)
	}
	if became.Load() != 1 {
		t.Errorf("OnLeader(true): got %d calls; want 1", became.Load())
	}
	s := n.Stats()
	if s.Servers != 1 || !s.Voter || !s.Ready {
		t.Errorf("stats: got %+v; want one voter, ready", s)
	}
	if err := n.TransferLeadership("n1"); err == nil {
		t.Errorf("transfer to itself: got nil error; want one")
	}
	if err := n.RemoveServer("ghost"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("remove unknown server: got %v; want ErrNotFound", err)
	}
	if err := n.TransferLeadership("ghost"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("transfer to unknown server: got %v; want ErrNotFound", err)
	}
	if lc := n.LastContact(); lc.IsZero() {
		t.Errorf("last contact on the leader: got zero; want now")
	}
}

func TestOnlyBootstrappingLeaderSetsSecret(t *testing.T) {
	tn := newTestNode(t, func(c *Config) { c.Bootstrap = false })
	n := tn.n
	// Form the cluster behind the node's back: it leads, but it did not
	// bootstrap, so it must not invent a permutation key.
	conf := hraft.Configuration{Servers: []hraft.Server{{Suffrage: hraft.Voter, ID: "n1", Address: hraft.ServerAddress(n.Addr())}}}
	if err := n.Raft().BootstrapCluster(conf).Error(); err != nil {
		t.Fatalf("raw bootstrap: %v", err)
	}
	waitFor(t, "leadership", func() (bool, string) { return n.IsLeader(), n.Stats().State })
	waitFor(t, "a clear readiness detail", func() (bool, string) {
		_, detail := n.Ready()
		return strings.Contains(detail, "secret not applied"), detail
	})
	if _, found, _ := tn.st.Secret(); found {
		t.Fatalf("secret: got one; want none from a leader that did not bootstrap")
	}
	// Declaring the bootstrap (as --bootstrap-expect does on every start)
	// lets the leader set it.
	if err := n.BootstrapCluster([]Server{{ID: "n1", Address: n.Addr(), Voter: true}}); err != nil {
		t.Fatalf("bootstrap over existing state: %v", err)
	}
	if err := n.WaitReady(testCtx(t)); err != nil {
		t.Fatalf("wait ready: %v", err)
	}
}
