package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/waymark/waymark/raft"
	"github.com/waymark/waymark/store"
)

// Membership reconciliation. Gossip says who is around; only the Raft
// leader turns that into configuration changes, one step at a time:
//
//	alive, not in Raft           -> add as non-voter (never straight into the quorum)
//	voter role, non-voter, caught up and healthy for StabilizeAfter -> promote
//	left (graceful)              -> remove at once
//	dead for longer than DeadGrace -> remove, if it also fails a direct probe
//	                                  and, for a voter, the quorum stays safe
//
// Gossip alone never shrinks the voters: a member that memberlist calls
// dead but that answers the leader's direct status call over the internal
// API is kept (gossip can break while Raft and HTTP work: a firewalled
// gossip port, a wrong gossip address). And a dead voter is removed only
// while a majority of the current voters is alive in gossip, one voter per
// pass, so a leader cut off from gossip does not reduce the cluster to
// itself. A periodic full pass catches events that were dropped.

const (
	reconcileInterval = 2 * time.Second
	stabilizeAfter    = 3 * time.Second // healthy time before a voter is promoted
	maxTrailing       = 1024            // entries a voter may trail and still be promoted
)

type reconciler struct {
	n          *Node
	events     chan MemberEvent
	aliveSince map[string]time.Time
	downSince  map[string]time.Time
	kept       map[string]string // members kept despite gossip, and why (logged once per reason)
	m          reconcileMetrics
}

// reconcileMetrics counts removals the reconciler held back.
type reconcileMetrics struct {
	keptAnswering *metrics.Counter // dead in gossip, but answered a direct probe
	keptQuorum    *metrics.Counter // dead voter kept: removing it was not quorum-safe
	heldRemoved   *metrics.Counter // alive, but an operator removed it and it has not restarted
}

func (n *Node) startReconciler(ctx context.Context, events chan MemberEvent) {
	r := &reconciler{n: n, events: events, aliveSince: map[string]time.Time{}, downSince: map[string]time.Time{}, kept: map[string]string{},
		m: reconcileMetrics{
			keptAnswering: n.metrics.GetOrCreateCounter(`waymark_reconcile_removals_held_total{reason="answers_probe"}`),
			keptQuorum:    n.metrics.GetOrCreateCounter(`waymark_reconcile_removals_held_total{reason="quorum"}`),
			heldRemoved:   n.metrics.GetOrCreateCounter(`waymark_reconcile_adds_held_total{reason="operator_removed"}`),
		}}
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		t := time.NewTicker(reconcileInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-events:
			case <-t.C:
			}
			if n.raft.IsLeader() {
				r.pass(ctx)
			}
		}
	}()
}

func (r *reconciler) pass(ctx context.Context) {
	n := r.n
	servers, err := n.raft.Servers()
	if err != nil {
		n.log.Warn("cannot read raft configuration", "err", err)
		return
	}
	inRaft := map[string]raft.Server{}
	for _, s := range servers {
		inRaft[s.ID] = s
	}
	members := n.gossip.Members()
	voterRemovals := r.safeVoterRemovals(servers, members)
	now := time.Now()
	for _, m := range members {
		if m.Name == n.cfg.Name {
			continue
		}
		s, member := inRaft[m.Name]
		switch m.Status {
		case "alive":
			delete(r.downSince, m.Name)
			delete(r.kept, m.Name)
			if _, ok := r.aliveSince[m.Name]; !ok {
				r.aliveSince[m.Name] = now
			}
			switch {
			case !member:
				if held, first := n.removals.held(m); held {
					r.m.heldRemoved.Inc()
					if first {
						n.log.Warn("membership change held back", "change", "add non-voter", "member", m.Name,
							"reason", "an operator removed it; it is let back in when it restarts")
					}
					continue
				}
				r.change("add non-voter", m, n.raft.AddNonvoter(m.Name, m.RaftAddr))
			case !s.Voter && hasRole(m.Roles, RoleVoter) && now.Sub(r.aliveSince[m.Name]) >= stabilizeAfter && r.caughtUp(ctx, m):
				r.change("promote to voter", m, n.raft.AddVoter(m.Name, m.RaftAddr))
			case s.Address != m.RaftAddr && m.RaftAddr != "":
				// Restarted on a new raft address: re-add under the new one.
				r.change("update address", m, r.readd(m, s.Voter))
			}
		case "left":
			delete(r.aliveSince, m.Name)
			if member {
				r.change("remove left member", m, n.raft.RemoveServer(m.Name))
			}
		default: // dead
			delete(r.aliveSince, m.Name)
			if _, ok := r.downSince[m.Name]; !ok {
				r.downSince[m.Name] = now
			}
			if !member || m.Status != "dead" || now.Sub(r.downSince[m.Name]) < n.cfg.DeadGrace {
				continue
			}
			if r.answers(ctx, m) {
				r.keep(m, "dead in gossip but answers its status call", r.m.keptAnswering)
				continue
			}
			if s.Voter {
				if voterRemovals == 0 {
					r.keep(m, "removing this voter is not quorum-safe: too few voters are alive in gossip", r.m.keptQuorum)
					continue
				}
				voterRemovals--
			}
			delete(r.kept, m.Name)
			r.change("remove dead member", m, n.raft.RemoveServer(m.Name))
		}
	}
}

// safeVoterRemovals is how many dead voters this pass may remove: one
// while the voters gossip sees alive (this leader included) are a strict
// majority of the current voters, so the voters that stay can always
// outvote the ones removed; none otherwise. A voter gossip has never
// heard of counts as not alive.
func (r *reconciler) safeVoterRemovals(servers []raft.Server, members []Member) int {
	status := map[string]string{r.n.cfg.Name: "alive"}
	for _, m := range members {
		if m.Name != r.n.cfg.Name {
			status[m.Name] = m.Status
		}
	}
	voters, alive := 0, 0
	for _, s := range servers {
		if !s.Voter {
			continue
		}
		voters++
		if status[s.ID] == "alive" {
			alive++
		}
	}
	if alive > voters/2 {
		return 1
	}
	return 0
}

// answers reports whether a member gossip calls dead still answers the
// internal status call, i.e. the process is up and reachable.
func (r *reconciler) answers(ctx context.Context, m Member) bool {
	if m.HTTPAddr == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, _, err := r.n.peers.do(ctx, m.HTTPAddr, internalStatus, nil)
	return err == nil
}

// keep counts a removal held back and logs it once per member and reason.
func (r *reconciler) keep(m Member, why string, c *metrics.Counter) {
	c.Inc()
	if r.kept[m.Name] == why {
		return
	}
	r.kept[m.Name] = why
	r.n.log.Warn("membership change held back", "change", "remove dead member", "member", m.Name, "region", m.Region, "reason", why)
}

func (r *reconciler) readd(m Member, voter bool) error {
	if voter {
		return r.n.raft.AddVoter(m.Name, m.RaftAddr)
	}
	return r.n.raft.AddNonvoter(m.Name, m.RaftAddr)
}

func (r *reconciler) change(what string, m Member, err error) {
	if err != nil {
		r.n.log.Warn("membership change failed", "change", what, "member", m.Name, "err", err)
		return
	}
	r.n.log.Info("membership changed", "change", what, "member", m.Name, "region", m.Region, "raft_addr", m.RaftAddr)
}

// caughtUp asks a member how far it has applied the log.
func (r *reconciler) caughtUp(ctx context.Context, m Member) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	b, _, err := r.n.peers.do(ctx, m.HTTPAddr, internalStatus, nil)
	if err != nil {
		return false
	}
	var st InternalStatus
	if json.Unmarshal(b, &st) != nil {
		return false
	}
	commit := r.n.raft.Stats().CommitIndex
	return st.Ready && st.AppliedIndex+maxTrailing >= commit
}

func hasRole(roles []Role, want Role) bool {
	for _, r := range roles {
		if r == want {
			return true
		}
	}
	return false
}

// bootstrapWhenExpected waits until --bootstrap-expect voters are alive in
// gossip, then bootstraps Raft with exactly those (sorted by name, so every
// voter proposes the same configuration).
func (n *Node) bootstrapWhenExpected(ctx context.Context) {
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			var voters []raft.Server
			for _, m := range n.gossip.Members() {
				if m.Status == "alive" && hasRole(m.Roles, RoleVoter) {
					voters = append(voters, raft.Server{ID: m.Name, Address: m.RaftAddr, Voter: true})
				}
			}
			if len(voters) < n.cfg.BootstrapExpect {
				continue
			}
			sort.Slice(voters, func(i, j int) bool { return voters[i].ID < voters[j].ID })
			voters = voters[:n.cfg.BootstrapExpect]
			if err := n.raft.BootstrapCluster(voters); err != nil {
				n.log.Error("cannot bootstrap cluster", "err", err)
				return
			}
			n.log.Info("bootstrapped cluster", "voters", len(voters))
			return
		}
	}()
}

// MembershipRequest is an operator change run on the leader.
type MembershipRequest struct {
	Op string `json:"op"` // remove-peer, transfer-leader
	ID string `json:"id"`
}

// changeMembership runs an operator change on the leader, forwarding it
// there when this node is not the leader.
func (n *Node) changeMembership(ctx context.Context, req MembershipRequest) error {
	if n.raft.IsLeader() {
		return n.applyMembership(req)
	}
	// Right after an election a node may not know the leader yet; an
	// operator command waits a little rather than failing at once.
	leader := n.raft.Stats().LeaderID
	for deadline := time.Now().Add(5 * time.Second); leader == "" && time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if n.raft.IsLeader() {
			return n.applyMembership(req)
		}
		leader = n.raft.Stats().LeaderID
	}
	addr, ok := n.httpAddrOf(leader)
	if leader == "" || !ok {
		return fmt.Errorf("cannot %s: %w", req.Op, store.ErrNoLeader)
	}
	body, _ := json.Marshal(req)
	if b, status, err := n.peers.do(ctx, addr, internalMembership, body); err != nil {
		if status == 404 {
			return fmt.Errorf("%w: %s", errUnknownPeer, b)
		}
		return err
	}
	return nil
}

var errUnknownPeer = errors.New("unknown peer")

// gossipBoot is the Boot id gossip shows for a member, "" if none.
func (n *Node) gossipBoot(name string) string {
	for _, m := range n.gossip.Members() {
		if m.Name == name {
			return m.Boot
		}
	}
	return ""
}

func (n *Node) applyMembership(req MembershipRequest) error {
	switch req.Op {
	case "remove-peer":
		servers, err := n.raft.Servers()
		if err != nil {
			return err
		}
		for _, s := range servers {
			if s.ID != req.ID {
				continue
			}
			// Hold before removing: a reconciler pass in between must not
			// put back a member gossip has not yet seen die.
			n.removals.hold(req.ID, n.gossipBoot(req.ID))
			if err := n.raft.RemoveServer(req.ID); err != nil {
				n.removals.release(req.ID)
				return err
			}
			return nil
		}
		return fmt.Errorf("%w: no raft peer with id %q", errUnknownPeer, req.ID)
	case "transfer-leader":
		return n.raft.TransferLeadership(req.ID)
	}
	return fmt.Errorf("unknown membership operation %q", req.Op)
}
