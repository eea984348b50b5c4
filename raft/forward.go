package raft

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/waymark/waymark/store"
)

// ForwardSlack is the room a forwarding node keeps for the leader's answer
// to travel back: the leader is given the forwarding node's time left
// minus ForwardSlack, so its own deadline ends first and its answer, even
// "unknown outcome", arrives instead of a local timeout.
const ForwardSlack = time.Second

// LeaderTimeoutHeader carries, on a forwarded command, how many
// milliseconds the leader may spend on it (see LeaderTimeout).
const LeaderTimeoutHeader = "Waymark-Leader-Timeout"

type leaderTimeoutKey struct{}

// LeaderTimeout is how long the leader may take over the command that
// Config.Forward is sending with ctx; the transport must pass it on (as
// LeaderTimeoutHeader) and the leader must answer within it. ok is false
// for a ctx that did not come from a forward.
func LeaderTimeout(ctx context.Context) (d time.Duration, ok bool) {
	d, ok = ctx.Value(leaderTimeoutKey{}).(time.Duration)
	return d, ok
}

// ParseLeaderTimeout reads a LeaderTimeoutHeader value on the leader: the
// time granted, at most max. A missing or bad value gives max (a node
// from before the header).
func ParseLeaderTimeout(v []byte, max time.Duration) time.Duration {
	ms, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || ms <= 0 || time.Duration(ms)*time.Millisecond > max {
		return max
	}
	return time.Duration(ms) * time.Millisecond
}

// FormatLeaderTimeout is the LeaderTimeoutHeader value for d.
func FormatLeaderTimeout(d time.Duration) string {
	return strconv.FormatInt(max(1, d.Milliseconds()), 10)
}

// forwardable lists the commands a follower may send to the leader. The
// permutation key is never forwarded: only a bootstrapping leader sets it.
var forwardable = map[cmdType]bool{
	cmdCreateLink:  true,
	cmdUpdateLink:  true,
	cmdCreateOwner: true,
	cmdCreateSite:  true,
	cmdAllocBlock:  true,
	cmdUpdateSite:  true,
	cmdClaimRegion: true,
	// Operator commands from any node's admin API (issue 11).
	cmdBlocklistUpdate: true,
	// Reports: an edge files them, any node's admin API resolves them.
	cmdFileReport:    true,
	cmdResolveReport: true,
	// Issue 11: an operator may suspend an owner through any node; the
	// purge is the leader's own.
	cmdSetOwnerSuspended: true,
	// Issue 12: bulk creates from any node's public API.
	cmdCreateLinksBulk: true,
	// Issue 12: keys are made and revoked through any node, and each node
	// flushes the last-used times it collected.
	cmdCreateKey: true,
	cmdRevokeKey: true,
	cmdTouchKeys: true,
	// Issue 12: owners register and delete custom domains through any
	// edge; an operator approves or adds them through any node.
	cmdDomainUpdate: true,
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
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ApplyTimeout+ForwardSlack)
	defer cancel()
	d, _ := ctx.Deadline()
	leaderTimeout := min(n.cfg.ApplyTimeout, time.Until(d)-ForwardSlack)
	if leaderTimeout <= 0 {
		// Not sent: too little time left for the leader to answer.
		return nil, fmt.Errorf("cannot forward command to leader %s: less than %s left: %w", leaderID, ForwardSlack, context.DeadlineExceeded)
	}
	ctx = context.WithValue(ctx, leaderTimeoutKey{}, leaderTimeout)
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

// waitApplied waits, briefly, until this node's store has applied index,
// so a write answered here is visible here on the very next request (an
// edit or takedown through an edge must not keep redirecting from its
// replica). The FSM signals every batch it commits, so the wait ends as
// soon as the entry is in Pebble. The write is committed either way; a
// slow replica only delays the answer.
func (n *Node) waitApplied(ctx context.Context, index uint64) {
	if index == 0 {
		return
	}
	if !n.applied.wait(ctx, index, time.Second) {
		n.m.forwardApplyWaitTimeouts.Inc()
	}
}

// forwardError maps a transport failure. Only a request that certainly
// never reached the leader may say "no leader" (safe to retry anywhere),
// and only a request the leader turned away before its log may say
// "refused" or "cluster keys differ"; every other failure may have been
// applied.
func forwardError(leaderID string, err error) error {
	switch {
	case errors.Is(err, store.ErrUnknownOutcome):
		return fmt.Errorf("cannot confirm command forwarded to leader %s: %w", leaderID, err)
	case errors.Is(err, store.ErrRefused), errors.Is(err, store.ErrClusterKeyMismatch):
		return fmt.Errorf("leader %s turned the command away, so it had no effect: %w", leaderID, err)
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
