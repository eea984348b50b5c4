package store

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Owner suspension is a field of the owner record, not a rewrite of the
// owner's links: the redirect and API paths check an in-memory set of
// suspended owners that every replica keeps from these records (loaded by
// SuspendedOwners at start, then kept up to date by the FSM).

// MaxSuspendReason bounds a suspension's reason, in bytes.
const MaxSuspendReason = 1024

// ErrInvalidSuspension means a suspension whose fields the store refuses
// (a reason too long); nothing is written.
var ErrInvalidSuspension = errors.New("invalid suspension")

// CheckSuspendReason refuses a reason the owner record would not hold.
func CheckSuspendReason(reason string) error {
	if len(reason) > MaxSuspendReason {
		return fmt.Errorf("%w: reason is %d bytes; the limit is %d", ErrInvalidSuspension, len(reason), MaxSuspendReason)
	}
	return nil
}

// Owner reads an owner as of the batch.
func (b *Batch) Owner(id string) (Owner, bool, error) {
	var o Owner
	found, err := get(b.b, ownerKey(id), func(v []byte) error { return DecodeOwner(v, &o) })
	if err != nil {
		return Owner{}, false, fmt.Errorf("cannot read owner %q: %w", id, err)
	}
	return o, found, nil
}

// SetOwnerSuspended suspends (with the time and reason) or unsuspends an
// owner and returns the record as stored. An unknown owner is ErrNotFound.
// Suspending a suspended owner keeps its first time and reason: the
// record says since when. Deterministic given the same prior state.
func (b *Batch) SetOwnerSuspended(id string, suspended bool, at int64, reason string) (Owner, error) {
	if err := CheckSuspendReason(reason); err != nil {
		return Owner{}, fmt.Errorf("cannot suspend owner %q: %w", id, err)
	}
	o, found, err := b.Owner(id)
	if err != nil {
		return Owner{}, err
	}
	if !found {
		return Owner{}, fmt.Errorf("cannot change suspension of owner %q: %w", id, ErrNotFound)
	}
	switch {
	case suspended && o.Suspended:
		return o, nil
	case suspended:
		o.Suspended, o.SuspendedAt, o.SuspendReason = true, at, reason
	default:
		o.Suspended, o.SuspendedAt, o.SuspendReason = false, 0, ""
	}
	if err := b.set(ownerKey(o.ID), AppendOwner(nil, &o)); err != nil {
		return Owner{}, fmt.Errorf("cannot write owner %q: %w", o.ID, err)
	}
	// Like a link takedown: a suspension must survive a power loss of a
	// node that restarts cut off from the leader.
	b.durable = true
	return o, nil
}

// SuspendedOwners lists the ids of every suspended owner.
func (s *Store) SuspendedOwners() ([]string, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tabOwner}, UpperBound: []byte{tabOwner + 1}})
	if err != nil {
		return nil, fmt.Errorf("cannot list owners: %w", storageErr(err))
	}
	defer it.Close()
	var ids []string
	for valid := it.First(); valid; valid = it.Next() {
		v := it.Value()
		if len(v) == 0 || v[0] != ownerVersion2 {
			continue // version 1: never suspended, or unsuspended
		}
		var o Owner
		if err := DecodeOwner(v, &o); err != nil {
			return nil, fmt.Errorf("cannot list owners: %w", storageErr(err))
		}
		ids = append(ids, o.ID)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("cannot list owners: %w", storageErr(err))
	}
	return ids, nil
}
