package store

import (
	"errors"
	"fmt"
)

// Sentinel errors. Other packages alias these rather than defining their own,
// so errors.Is works across layers.
var (
	// ErrNotFound means the key does not exist.
	ErrNotFound = errors.New("not found")
	// ErrCodeTaken means a code (generated or alias) is already reserved,
	// including by a tombstoned link.
	ErrCodeTaken = errors.New("code already taken")
	// ErrCorrupt means a stored or received record could not be decoded.
	ErrCorrupt = errors.New("corrupt record")
	// ErrRegionSpaceFull means all region slots are assigned.
	ErrRegionSpaceFull = errors.New("no free region slot")
	// ErrRegionUnclaimed means a region has no slot of the ID space: an
	// operator claims one with `waymark regions add`.
	ErrRegionUnclaimed = errors.New("region not claimed")
	// ErrRangeExhausted means a region has spent its whole ID range.
	ErrRangeExhausted = errors.New("region ID range exhausted")
	// ErrBadCode means a string is not a valid code.
	ErrBadCode = errors.New("invalid code")
)

// Errors of the replicated write path. They are defined here, in the package
// every layer imports, so edge, node and raft share one value each.
var (
	// ErrNoLeader means the cluster has no leader to take a write now.
	ErrNoLeader = errors.New("no raft leader")
	// ErrUnknownOutcome means a write was submitted but its commit could not
	// be confirmed (leadership was lost or the deadline passed). It may or
	// may not have been applied; it must never be reported as success.
	ErrUnknownOutcome = errors.New("outcome of write unknown")
	// ErrIdempotencyMismatch means an Idempotency-Key was reused with a
	// different request body.
	ErrIdempotencyMismatch = errors.New("idempotency key reused with a different request")
	// ErrRefused means the leader refused a forwarded write before it
	// reached the log (it could not read the command): it had no effect,
	// and sending the same bytes again is refused again.
	ErrRefused = errors.New("write refused by the leader")
	// ErrClusterKeyMismatch means a peer refused a node-to-node call
	// because the two nodes hold different cluster keys: it had no effect.
	ErrClusterKeyMismatch = errors.New("cluster keys differ")
)

// ErrDomainTaken means a site is already registered for the domain.
var ErrDomainTaken = errors.New("domain already registered")

// ErrStorage means the store itself failed: Pebble could not read, write or
// commit, or a stored record does not decode. It is never a verdict on a
// command: the same command on a healthy replica would have been applied
// or refused, so the FSM halts on it instead of recording a refusal. Every
// error of the write path that comes from Pebble wraps it; any other error
// a Batch method returns is the command being refused.
var ErrStorage = errors.New("storage failure")

// storageErr marks err as coming from the storage layer.
func storageErr(err error) error { return fmt.Errorf("%w: %w", ErrStorage, err) }

// ErrOtherCluster means the store holds another cluster's state: its
// cluster id differs from the one in the raft log it is asked to follow.
// Applying that log would skip entries up to the store's own applied index
// as if they were already there.
var ErrOtherCluster = errors.New("store belongs to another cluster")
