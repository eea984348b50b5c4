package raft

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/waymark/waymark/store"
)

// forwardSlack is how much longer a forwarding node waits than the leader
// does: the leader's own deadline (ApplyTimeout) ends first, so its answer,
// even "unknown outcome", usually arrives instead of a local timeout.
const forwardSlack = time.Second

// forwardable lists the commands a follower may send to the leader. The
// permutation key is never forwarded: only a bootstrapping leader sets it.
var forwardable = map[cmdType]bool{
	cmdCreateLink:  true,
	cmdUpdateLink:  true,
	cmdCreateOwner: true,
	cmdCreateSite:  true,
	cmdAllocBlock:  true,
	cmdUpdateSite:  true,
}

// forward sends cmd to the leader this node knows of. Forwarding happens
// at the command level: the follower encodes exactly the entry the leader
// will append, so the leader needs no knowledge of the request that made
// it, and one leader answer maps back onto the same applyResult a local
// apply gives.
func (n *Node) forward(ctx context.Context, cmd []byte) (*applyResult, error) {
	addr, id := n.raft.LeaderWithID()
	if id == "" || string(id) == n.cfg.NodeID {
		return nil, fmt.Errorf("cannot forward command: node %s knows no leader: %w", n.cfg.NodeID, store.ErrNoLeader)
	}
	return n.forwardTo(ctx, string(id), string(addr), cmd)
}

func (n *Node) forwardTo(ctx context.Context, leaderID, leaderAddr string, cmd []byte) (*applyResult, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ApplyTimeout+forwardSlack)
	defer cancel()
	b, err := n.cfg.Forward(ctx, leaderID, leaderAddr, cmd)
	if err != nil {
		return nil, forwardError(leaderID, err)
	}
	res, err := decodeResult(b)
	if err != nil {
		// The leader answered, so it may well have applied the command.
		return nil, fmt.Errorf("cannot read answer of leader %s: %w: %w", leaderID, store.ErrUnknownOutcome, err)
	}
	if res.Err != nil {
		res.Err = fmt.Errorf("leader %s: %w", leaderID, res.Err)
		return res, res.Err
	}
	n.waitApplied(ctx, res.Index)
	return res, nil
}

// waitApplied waits, briefly, until this node has applied index itself, so
// a write answered here is visible here on the very next request (an edit
// or takedown through an edge must not keep redirecting from its replica).
// The write is committed either way; a slow replica only delays the answer.
func (n *Node) waitApplied(ctx context.Context, index uint64) {
	if index == 0 {
		return
	}
	deadline := time.Now().Add(time.Second)
	for n.raft.AppliedIndex() < index {
		if time.Now().After(deadline) || ctx.Err() != nil {
			n.m.forwardApplyWaitTimeouts.Inc()
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// forwardError maps a transport failure. Only a request that certainly
// never reached the leader may say "no leader" (safe to retry anywhere);
// every other failure may have been applied.
func forwardError(leaderID string, err error) error {
	switch {
	case errors.Is(err, store.ErrUnknownOutcome):
		return fmt.Errorf("cannot confirm command forwarded to leader %s: %w", leaderID, err)
	case errors.Is(err, store.ErrNoLeader):
		return fmt.Errorf("cannot forward command to leader %s: %w", leaderID, err)
	default:
		return fmt.Errorf("cannot confirm command forwarded to leader %s: %w: %w", leaderID, store.ErrUnknownOutcome, err)
	}
}

// ApplyForwarded is the leader's side of forwarding: it applies a command
// another node encoded through the same path local writes take and returns
// the encoded answer for that node's Forward to hand back. Every outcome
// of the command (success, a refusal such as store.ErrCodeTaken, "not the
// leader" as store.ErrNoLeader, store.ErrUnknownOutcome) is inside the
// answer and the error is nil; a node that is not the leader answers
// ErrNoLeader rather than forwarding again. A command that cannot be
// decoded, or may not be forwarded, gives a nil answer and an error
// wrapping store.ErrCorrupt (the caller should answer it as a bad
// request).
func (n *Node) ApplyForwarded(ctx context.Context, cmd []byte) ([]byte, error) {
	h, _, err := decodeCommand(cmd)
	if err == nil && !forwardable[h.typ] {
		err = fmt.Errorf("command type %d may not be forwarded", h.typ)
	}
	if err != nil {
		n.m.forwardedCorrupt.Inc()
		return nil, fmt.Errorf("cannot apply forwarded command: %w: %w", store.ErrCorrupt, err)
	}
	start := time.Now()
	res, err := n.applyLocal(ctx, cmd)
	n.m.countApply(start, err)
	n.m.forwardedIn.count(err)
	var out applyResult
	if res != nil {
		out = *res
	}
	out.Err = err
	return appendResult(nil, &out), nil
}
