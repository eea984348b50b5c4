package raft

import (
	"context"
	"errors"
	"fmt"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/waymark/waymark/store"
)

// apply is the one path every replicated write takes: encode, hand to the
// leader (this node's raft, or the remote leader through Config.Forward),
// wait for the FSM's answer.
func (n *Node) apply(ctx context.Context, cmd []byte) (*applyResult, error) {
	// Check the command as every replica's FSM will: one that no replica
	// would apply (a field the store cannot hold) is refused here, before
	// it reaches a log or a leader.
	if _, _, err := decodeCommand(cmd); err != nil {
		return nil, fmt.Errorf("cannot apply command: %w", err)
	}
	start := time.Now()
	var res *applyResult
	var err error
	if n.cfg.Forward != nil && n.raft.State() != hraft.Leader {
		res, err = n.forward(ctx, cmd)
		n.m.countForward(start, err)
	} else {
		res, err = n.applyLocal(ctx, cmd)
	}
	n.m.countApply(start, err)
	return res, err
}

// applyLocal appends cmd to this node's log; only the leader can.
func (n *Node) applyLocal(ctx context.Context, cmd []byte) (*applyResult, error) {
	if n.raft.State() != hraft.Leader {
		_, leader := n.raft.LeaderWithID()
		return nil, fmt.Errorf("cannot apply command: node %s is not the leader (leader %q): %w", n.cfg.NodeID, leader, store.ErrNoLeader)
	}
	timeout := n.cfg.ApplyTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(d))
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("cannot apply command: %w", context.DeadlineExceeded)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()

	f := n.raft.Apply(cmd, timeout)
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		if err != nil {
			return nil, applyError(err)
		}
	case <-timer.C:
		return nil, fmt.Errorf("cannot confirm command within %s: %w", timeout, store.ErrUnknownOutcome)
	case <-ctx.Done():
		return nil, fmt.Errorf("cannot confirm command: %w: %w", store.ErrUnknownOutcome, ctx.Err())
	}
	res, ok := f.Response().(*applyResult)
	if !ok {
		return nil, fmt.Errorf("cannot read command result: got %T: %w", f.Response(), store.ErrUnknownOutcome)
	}
	return res, res.Err
}

// applyError maps a failed future to the store's sentinels. Only errors
// raised before the entry reached the log mean "not written"; any other
// may have been committed and must never read as success or as failure.
func applyError(err error) error {
	switch {
	case errors.Is(err, hraft.ErrNotLeader), errors.Is(err, hraft.ErrEnqueueTimeout):
		return fmt.Errorf("cannot apply command: %w: %w", store.ErrNoLeader, err)
	default: // ErrLeadershipLost, ErrAbortedByRestore, ErrRaftShutdown, disk errors
		return fmt.Errorf("cannot confirm command: %w: %w", store.ErrUnknownOutcome, err)
	}
}

// CreateLink stores a new link. A zero Redirect becomes 302. On success it
// sets l.Index to the log index and returns it. If idem is given and its
// owner already used the key within the TTL, nothing is created and the
// earlier record is returned for the caller to compare request hashes.
// A code that was ever used fails with store.ErrCodeTaken.
func (n *Node) CreateLink(ctx context.Context, l *store.Link, idem *store.IdempotencyWrite) (index uint64, existing *store.Idempotency, err error) {
	link := *l
	if link.Redirect == 0 {
		link.Redirect = 302
	}
	if err := validateLink(&link); err != nil {
		return 0, nil, err
	}
	res, err := n.apply(ctx, appendCreateLink(nil, &link, idem))
	if err != nil {
		return 0, nil, err
	}
	if res.Existing != nil {
		return res.Index, res.Existing, nil
	}
	l.Redirect = link.Redirect
	l.Index = res.Index
	return res.Index, nil, nil
}

func validateLink(l *store.Link) error {
	switch {
	case l.Code == "":
		return errors.New("cannot create link: code is empty")
	case !store.ValidRedirect(int(l.Redirect)):
		return fmt.Errorf("cannot create link %q: redirect %d is not 301, 302, 307 or 308", l.Code, l.Redirect)
	case !validStatus(l.Status):
		return fmt.Errorf("cannot create link %q: unknown status %d", l.Code, l.Status)
	}
	if err := store.CheckLinkID(l.Code); err != nil {
		return fmt.Errorf("cannot create link: %w", err)
	}
	return nil
}

// UpdateLink applies an edit and returns the link as stored. Another
// owner's link fails with store.ErrNotFound, a new destination for a
// 301/308 link with store.ErrPermanentRedirect.
func (n *Node) UpdateLink(ctx context.Context, p *store.LinkPatch) (store.Link, error) {
	if p.Code == "" {
		return store.Link{}, errors.New("cannot update link: code is empty")
	}
	if p.SetStatus && !validStatus(p.Status) {
		return store.Link{}, fmt.Errorf("cannot update link %q: unknown status %d", p.Code, p.Status)
	}
	res, err := n.apply(ctx, appendUpdateLink(nil, p))
	if err != nil {
		return store.Link{}, err
	}
	return res.Link, nil
}

// CreateOwner registers an owner with the hash of its API key.
func (n *Node) CreateOwner(ctx context.Context, o *store.Owner, h store.KeyHash) (uint64, error) {
	if o.ID == "" {
		return 0, errors.New("cannot create owner: id is empty")
	}
	res, err := n.apply(ctx, appendCreateOwner(nil, o, h))
	if err != nil {
		return 0, err
	}
	return res.Index, nil
}

// CreateSite registers a site; a domain registers once
// (store.ErrDomainTaken).
func (n *Node) CreateSite(ctx context.Context, s *store.Site) (uint64, error) {
	if s.ID == "" || s.Domain == "" {
		return 0, errors.New("cannot create site: id or domain is empty")
	}
	res, err := n.apply(ctx, appendCreateSite(nil, s))
	if err != nil {
		return 0, err
	}
	return res.Index, nil
}
