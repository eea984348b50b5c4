package node

import (
	"context"
	"testing"
	"time"
)

// A gossip-only partition must not shrink the voter set. Three real voters
// form a cluster; then memberlist stops on the two followers (their Raft
// and HTTP keep working), so the leader's gossip marks them dead. Past
// --dead-grace the reconciler must keep both: each answers a direct
// status call, and with only the leader alive in gossip no removal is
// quorum-safe anyway. A follower that really stops is then removed, so
// the check is not simply "never remove".
func TestReconcilerKeepsVotersThroughGossipOnlyPartition(t *testing.T) {
	c := newTestCluster(t)
	args := []string{"--role", "voter", "--bootstrap-expect", "3", "--dead-grace", "500ms"}
	v1 := c.start("v1", append([]string{"--region", "us"}, args...)...)
	v2 := c.start("v2", append([]string{"--region", "us", "--join", v1.gossip.Addr()}, args...)...)
	v3 := c.start("v3", append([]string{"--region", "us", "--join", v1.gossip.Addr()}, args...)...)
	leader := leaderOf(t, v1, v2, v3)
	waitUntil(t, "three voters in raft", 30*time.Second, func() bool { return voterCount(t, leader) == 3 })

	var followers []*Node
	for _, n := range []*Node{v1, v2, v3} {
		if n != leader {
			followers = append(followers, n)
		}
	}
	held := func(reason string) uint64 {
		return leader.metrics.GetOrCreateCounter(`waymark_reconcile_removals_held_total{reason="` + reason + `"}`).Get()
	}

	// Break gossip on both followers: memberlist stops, nothing else does.
	for _, f := range followers {
		if err := f.gossip.Shutdown(); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "the leader's gossip to call both followers dead", 60*time.Second, func() bool {
		return gossipStatus(leader, followers[0].cfg.Name) == "dead" && gossipStatus(leader, followers[1].cfg.Name) == "dead"
	})
	// Each pass past the grace considers both removals; wait for several
	// passes' worth of held-back removals, failing at once if one happens.
	base := held("answers_probe")
	waitUntil(t, "the reconciler to hold back removals over several passes", 60*time.Second, func() bool {
		if got := voterCount(t, leader); got != 3 {
			t.Fatalf("gossip-only partition shrank the voters to %d: %v", got, voters(t, leader))
		}
		return held("answers_probe") >= base+6
	})
	if !leader.raft.IsLeader() || voterCount(t, leader) != 3 {
		t.Fatalf("after the gossip-only partition: leader %v, voters %v; want the same leader and 3 voters", leader.raft.IsLeader(), voters(t, leader))
	}

	// One of them now really stops (its HTTP too), so the probe no longer
	// keeps it; with only the leader alive in gossip, the quorum rule
	// still does.
	gone := followers[1]
	c.stop(gone)
	baseQuorum := held("quorum")
	waitUntil(t, "the quorum rule to hold back the stopped voter", 60*time.Second, func() bool {
		if got := voterCount(t, leader); got != 3 {
			t.Fatalf("with one follower gossip-partitioned and one stopped, voters shrank to %d: %v", got, voters(t, leader))
		}
		return held("quorum") > baseQuorum
	})
}

// The quorum rules do not stop the ordinary case: a voter that really
// stops, while the others are alive in gossip, is removed after
// --dead-grace.
func TestReconcilerRemovesDeadVoter(t *testing.T) {
	c := newTestCluster(t)
	args := []string{"--role", "voter", "--region", "us", "--bootstrap-expect", "3", "--dead-grace", "500ms"}
	v1 := c.start("v1", args...)
	v2 := c.start("v2", append([]string{"--join", v1.gossip.Addr()}, args...)...)
	v3 := c.start("v3", append([]string{"--join", v1.gossip.Addr()}, args...)...)
	leader := leaderOf(t, v1, v2, v3)
	waitUntil(t, "three voters in raft", 30*time.Second, func() bool { return voterCount(t, leader) == 3 })
	var gone *Node
	for _, n := range []*Node{v1, v2, v3} {
		if n != leader {
			gone = n
			break
		}
	}
	name := gone.cfg.Name
	c.stop(gone)
	waitUntil(t, name+" removed from raft", 60*time.Second, func() bool {
		_, in := voters(t, leader)[name]
		return !in
	})
	if got := voterCount(t, leader); got != 2 {
		t.Fatalf("voters after removing %s: got %d (%v); want 2", name, got, voters(t, leader))
	}
}

// An operator's remove-peer sticks while gossip still calls the member
// alive (as it does for seconds after a process is killed): the reconciler
// must not add it straight back. Once the member restarts (a new process,
// so a new Boot id in gossip), it is let back in.
func TestReconcilerDoesNotUndoOperatorRemoval(t *testing.T) {
	c := newTestCluster(t)
	args := []string{"--role", "voter", "--region", "us", "--bootstrap-expect", "3"}
	v1 := c.start("v1", args...)
	v2 := c.start("v2", append([]string{"--join", v1.gossip.Addr()}, args...)...)
	v3 := c.start("v3", append([]string{"--join", v1.gossip.Addr()}, args...)...)
	leader := leaderOf(t, v1, v2, v3)
	edgeArgs := []string{"--role", "edge", "--region", "us", "--join", v1.gossip.Addr()}
	e1 := c.start("e1", edgeArgs...)
	inRaft := func() bool { _, in := voters(t, leader)["e1"]; return in }
	waitUntil(t, "e1 added to raft", 30*time.Second, inRaft)

	held := leader.metrics.GetOrCreateCounter(`waymark_reconcile_adds_held_total{reason="operator_removed"}`)
	base := held.Get()
	if err := leader.changeMembership(context.Background(), MembershipRequest{Op: "remove-peer", ID: "e1"}); err != nil {
		t.Fatalf("remove-peer e1: %v", err)
	}
	// Several reconcile passes see e1 alive in gossip; each must hold it out.
	waitUntil(t, "the reconciler to hold e1 out over several passes", 60*time.Second, func() bool {
		if inRaft() {
			t.Fatalf("the reconciler put e1 back after the operator removed it: %v", voters(t, leader))
		}
		return held.Get() >= base+3
	})
	if gossipStatus(leader, "e1") != "alive" {
		t.Fatalf("e1 is %q in gossip; the test needs it alive", gossipStatus(leader, "e1"))
	}

	// A restarted e1 is a new process: it comes back.
	// Same gossip address, so memberlist takes it as the same member back
	// at once rather than as a conflicting one.
	gossipAddr := e1.gossip.Addr()
	c.stop(e1)
	c.start("e1", append([]string{"--gossip-addr", gossipAddr}, edgeArgs...)...)
	waitUntil(t, "restarted e1 added back to raft", 60*time.Second, inRaft)
}
