package raft

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/waymark/waymark/store"
)

// Server is one member of the raft configuration.
type Server struct {
	ID      string // raft server ID (the node name)
	Address string // raft TCP address
	Voter   bool   // false: a non-voter (an edge, or a voter not yet promoted)
}

// Suffrage is "voter" or "nonvoter", as the operator CLI shows it.
func (s Server) Suffrage() string {
	if s.Voter {
		return "voter"
	}
	return "nonvoter"
}

// Servers returns the latest raft configuration this node knows, leader
// first-hand or follower from the log (it may not be committed yet). Any
// node can answer; nil before the node is part of a cluster.
func (n *Node) Servers() ([]Server, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("cannot read raft configuration: %w", err)
	}
	var out []Server
	for _, s := range f.Configuration().Servers {
		out = append(out, Server{ID: string(s.ID), Address: string(s.Address), Voter: s.Suffrage == hraft.Voter})
	}
	return out, nil
}

// server finds id in the latest configuration.
func (n *Node) server(id string) (Server, bool, error) {
	servers, err := n.Servers()
	if err != nil {
		return Server{}, false, err
	}
	for _, s := range servers {
		if s.ID == id {
			return s, true, nil
		}
	}
	return Server{}, false, nil
}

// AddNonvoter adds a server that receives the log but does not vote (an
// edge node, or a voter that must catch up before promotion). A server
// already in the configuration keeps its vote and gets the new address.
func (n *Node) AddNonvoter(id, addr string) error {
	return n.addServer("add non-voter", id, addr, false)
}

// AddVoter adds a server with a vote, or promotes a non-voter. Add an
// empty node as a non-voter first: a voter that has to copy the whole log
// counts against the quorum while it does.
func (n *Node) AddVoter(id, addr string) error {
	return n.addServer("add voter", id, addr, true)
}

func (n *Node) addServer(what, id, addr string, voter bool) error {
	if id == "" || addr == "" {
		return fmt.Errorf("cannot %s: id %q or address %q is empty", what, id, addr)
	}
	if err := n.requireLeader(what + " " + id); err != nil {
		return err
	}
	// Skip a change that changes nothing: the reconciler asks every pass.
	if s, found, err := n.server(id); err == nil && found && s.Address == addr && (s.Voter || !voter) {
		return nil
	}
	return n.changeConfig(what+" "+id, func(timeout time.Duration) hraft.Future {
		if voter {
			return n.raft.AddVoter(hraft.ServerID(id), hraft.ServerAddress(addr), 0, timeout)
		}
		return n.raft.AddNonvoter(hraft.ServerID(id), hraft.ServerAddress(addr), 0, timeout)
	})
}

// RemoveServer takes a server out of the configuration. An ID that is not
// in it fails with store.ErrNotFound. Removing the leader itself is
// allowed: it steps down once the change commits.
func (n *Node) RemoveServer(id string) error {
	what := "remove server " + id
	if err := n.requireLeader(what); err != nil {
		return err
	}
	if _, found, err := n.server(id); err != nil {
		return fmt.Errorf("cannot %s: %w", what, err)
	} else if !found {
		return fmt.Errorf("cannot %s: no raft server with that id: %w", what, store.ErrNotFound)
	}
	return n.changeConfig(what, func(timeout time.Duration) hraft.Future {
		return n.raft.RemoveServer(hraft.ServerID(id), 0, timeout)
	})
}

// TransferLeadership hands leadership to the voter id, or to the most
// up-to-date voter when id is empty, and waits until it has moved. An
// unknown id fails with store.ErrNotFound.
func (n *Node) TransferLeadership(id string) error {
	what := "transfer leadership"
	if id != "" {
		what += " to " + id
	}
	if err := n.requireLeader(what); err != nil {
		return err
	}
	if id == "" {
		return n.changeConfig(what, func(time.Duration) hraft.Future { return n.raft.LeadershipTransfer() })
	}
	s, found, err := n.server(id)
	switch {
	case err != nil:
		return fmt.Errorf("cannot %s: %w", what, err)
	case !found:
		return fmt.Errorf("cannot %s: no raft server with that id: %w", what, store.ErrNotFound)
	case !s.Voter:
		return fmt.Errorf("cannot %s: it is a non-voter", what)
	case id == n.cfg.NodeID:
		return fmt.Errorf("cannot %s: this node already leads", what)
	}
	return n.changeConfig(what, func(time.Duration) hraft.Future {
		return n.raft.LeadershipTransferToServer(hraft.ServerID(s.ID), hraft.ServerAddress(s.Address))
	})
}

// BootstrapCluster forms a new cluster of the given voters. Every expected
// voter (--bootstrap-expect) calls it with the same list; the order does
// not matter, it is sorted here so every node proposes the identical
// configuration. It only acts when this node has no raft state: on a node
// that already has some (a restart, or a cluster formed already) it does
// nothing and returns nil. This node must be in the list.
func (n *Node) BootstrapCluster(servers []Server) error {
	conf, err := n.bootstrapConfiguration(servers)
	if err != nil {
		return err
	}
	// The cluster this call forms, or one it formed before a restart,
	// may need its permutation key from this node.
	n.mayInitSecret.Store(true)
	existing, err := hraft.HasExistingState(n.bolt, n.bolt, n.snaps)
	if err != nil {
		return fmt.Errorf("cannot inspect raft state: %w", err)
	}
	if existing {
		return nil
	}
	applied, err := n.st.AppliedIndex()
	if err != nil {
		return err
	}
	if err := foreignStore(applied); err != nil {
		return err
	}
	err = waitFuture(n.raft.BootstrapCluster(conf), n.cfg.ApplyTimeout)
	if err != nil && !errors.Is(err, hraft.ErrCantBootstrap) {
		return fmt.Errorf("cannot bootstrap raft cluster: %w", err)
	}
	// A founding voter claims its own region, even if another founder's
	// AppendEntries raced its bootstrap (ErrCantBootstrap).
	n.claimOwnRegionInBackground()
	if err != nil {
		return nil // raced with a leader's AppendEntries: state exists now
	}
	n.log.Info("bootstrapped raft cluster", "voters", len(conf.Servers))
	return nil
}

func (n *Node) bootstrapConfiguration(servers []Server) (hraft.Configuration, error) {
	var conf hraft.Configuration
	self := false
	seen := map[string]bool{}
	for _, s := range servers {
		switch {
		case s.ID == "" || s.Address == "":
			return conf, fmt.Errorf("cannot bootstrap raft cluster: server %q at %q has an empty id or address", s.ID, s.Address)
		case seen[s.ID]:
			return conf, fmt.Errorf("cannot bootstrap raft cluster: server %q is listed twice", s.ID)
		}
		seen[s.ID] = true
		self = self || (s.ID == n.cfg.NodeID && s.Voter)
		suffrage := hraft.Nonvoter
		if s.Voter {
			suffrage = hraft.Voter
		}
		conf.Servers = append(conf.Servers, hraft.Server{Suffrage: suffrage, ID: hraft.ServerID(s.ID), Address: hraft.ServerAddress(s.Address)})
	}
	if !self {
		return conf, fmt.Errorf("cannot bootstrap raft cluster: this node %q is not a voter in the list", n.cfg.NodeID)
	}
	slices.SortFunc(conf.Servers, func(a, b hraft.Server) int { return strings.Compare(string(a.ID), string(b.ID)) })
	return conf, nil
}

// requireLeader fails with store.ErrNoLeader on a node that is not the
// leader: membership changes are the leader's.
func (n *Node) requireLeader(what string) error {
	if n.raft.State() == hraft.Leader {
		return nil
	}
	_, leader := n.raft.LeaderWithID()
	return fmt.Errorf("cannot %s: node %s is not the leader (leader %q): %w", what, n.cfg.NodeID, leader, store.ErrNoLeader)
}

// changeConfig runs one leader operation with the apply deadline and maps
// its failure like an apply's (ErrNoLeader if it never started,
// ErrUnknownOutcome if it may have).
func (n *Node) changeConfig(what string, start func(timeout time.Duration) hraft.Future) error {
	begin := time.Now()
	if err := waitFuture(start(n.cfg.ApplyTimeout), n.cfg.ApplyTimeout); err != nil {
		return fmt.Errorf("cannot %s: %w", what, applyError(err))
	}
	n.log.Info("raft membership changed", "change", what, "duration", time.Since(begin))
	return nil
}

// errFutureTimeout is a future that did not resolve within its deadline.
var errFutureTimeout = errors.New("raft did not answer in time")

// waitFuture waits for f at most timeout. raft resolves every future in
// the end (at the latest on shutdown), so the waiting goroutine never
// leaks for long.
func waitFuture(f hraft.Future, timeout time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		return fmt.Errorf("%w after %s", errFutureTimeout, timeout)
	}
}
