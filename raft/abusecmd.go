package raft

import (
	"context"
	"fmt"

	"github.com/waymark/waymark/store"
)

// Issue 11: owner suspension (set_owner_suspended) and the purge of
// deleted links' destinations (purge_deleted_links).

// ownerSuspension is one suspension change a batch applied, for the
// in-memory set of suspended owners (Config.OnOwnerSuspended).
type ownerSuspension struct {
	id        string
	suspended bool
}

// setOwnerSuspendedCmd suspends or unsuspends an owner. Version 1 payload:
//
//	owner id   string
//	suspended  byte 0 or 1
//	at         varint, ms: when (the requesting node's clock)
//	reason     string, empty when unsuspending
type setOwnerSuspendedCmd struct {
	Owner     string
	Suspended bool
	At        int64
	Reason    string
}

func (c *setOwnerSuspendedCmd) kind() cmdType { return cmdSetOwnerSuspended }

// appendSetOwnerSuspended encodes a SetOwnerSuspended command.
func appendSetOwnerSuspended(dst []byte, owner string, suspended bool, at int64, reason string) []byte {
	return appendCommand(dst, &setOwnerSuspendedCmd{Owner: owner, Suspended: suspended, At: at, Reason: reason})
}

func (c *setOwnerSuspendedCmd) appendPayload(dst []byte) []byte {
	dst = appendString(dst, c.Owner)
	dst = append(dst, boolByte(c.Suspended))
	dst = appendVarints(dst, c.At)
	return appendString(dst, c.Reason)
}

func decodeSetOwnerSuspended(_ byte, b []byte) (command, error) {
	r := newReader(b)
	c := &setOwnerSuspendedCmd{Owner: r.String(), Suspended: r.bool(), At: r.Varint(), Reason: r.String()}
	if !r.Done() || c.Owner == "" || (!c.Suspended && c.Reason != "") {
		return nil, corrupt("set_owner_suspended")
	}
	if err := store.CheckOwnerID(c.Owner); err != nil {
		return nil, invalid("set_owner_suspended", err)
	}
	if err := store.CheckSuspendReason(c.Reason); err != nil {
		return nil, invalid("set_owner_suspended", err)
	}
	return c, nil
}

func (c *setOwnerSuspendedCmd) apply(a *applier, _ uint64, res *applyResult) {
	if _, err := a.b.SetOwnerSuspended(c.Owner, c.Suspended, c.At, c.Reason); err != nil {
		a.reject(res, err)
		return
	}
	a.suspensions = append(a.suspensions, ownerSuspension{id: c.Owner, suspended: c.Suspended})
}

// SetOwnerSuspended suspends (suspended true, with a reason) or
// unsuspends an owner through the log and returns the owner as this
// node's store holds it afterwards. An unknown owner is store.ErrNotFound.
func (n *Node) SetOwnerSuspended(ctx context.Context, owner string, suspended bool, at int64, reason string) (store.Owner, error) {
	if !suspended {
		reason = ""
	}
	res, err := n.apply(ctx, appendSetOwnerSuspended(nil, owner, suspended, at, reason))
	if err != nil {
		return store.Owner{}, fmt.Errorf("cannot change suspension of owner %q: %w", owner, err)
	}
	n.waitApplied(ctx, res.Index) // a forwarded write is applied here already; a local one too
	o, found, err := n.st.Owner(owner)
	if err != nil {
		return store.Owner{}, err
	}
	if !found {
		return store.Owner{}, fmt.Errorf("cannot read owner %q after index %d: %w", owner, res.Index, store.ErrNotFound)
	}
	return o, nil
}

// maxPurgePerEntry bounds the codes one purge entry names, so one entry
// stays a small batch however many links are due.
const maxPurgePerEntry = 1024

// purgeDeletedLinksCmd clears the destination of the named deleted links
// that were deleted at or before Cutoff (ms). The leader found them in its
// replica; every replica checks each code again against its own state and
// the same cutoff, so all purge the same links. Version 1 payload:
//
//	cutoff  varint, ms
//	at      varint, ms: the purge time, the links' new UpdatedAt
//	count   uvarint, 1 to maxPurgePerEntry
//	codes   count strings, each non-empty
type purgeDeletedLinksCmd struct {
	Cutoff int64
	At     int64
	Codes  []string
}

func (c *purgeDeletedLinksCmd) kind() cmdType { return cmdPurgeDeletedLinks }

// appendPurgeDeletedLinks encodes a PurgeDeletedLinks command.
func appendPurgeDeletedLinks(dst []byte, cutoff, at int64, codes []string) []byte {
	return appendCommand(dst, &purgeDeletedLinksCmd{Cutoff: cutoff, At: at, Codes: codes})
}

func (c *purgeDeletedLinksCmd) appendPayload(dst []byte) []byte {
	dst = appendVarints(dst, c.Cutoff, c.At)
	dst = appendUvarint(dst, uint64(len(c.Codes)))
	for _, code := range c.Codes {
		dst = appendString(dst, code)
	}
	return dst
}

func decodePurgeDeletedLinks(_ byte, b []byte) (command, error) {
	r := newReader(b)
	c := &purgeDeletedLinksCmd{Cutoff: r.Varint(), At: r.Varint()}
	n := r.Uvarint()
	if n == 0 || n > maxPurgePerEntry {
		return nil, corrupt("purge_deleted_links")
	}
	c.Codes = make([]string, 0, n)
	for i := uint64(0); i < n; i++ {
		code := r.String()
		if code == "" {
			r.Fail()
			break
		}
		c.Codes = append(c.Codes, code)
	}
	if !r.Done() || c.At < c.Cutoff {
		return nil, corrupt("purge_deleted_links")
	}
	return c, nil
}

func (c *purgeDeletedLinksCmd) apply(a *applier, index uint64, res *applyResult) {
	purged, err := a.b.PurgeDeletedLinks(c.Codes, c.Cutoff, c.At, index)
	if err != nil {
		a.reject(res, err)
		return
	}
	a.purged += len(purged)
	a.changed = append(a.changed, purged...)
}
