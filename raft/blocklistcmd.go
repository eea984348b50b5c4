package raft

import (
	"context"
	"fmt"

	"github.com/waymark/waymark/store"
)

// blocklistUpdateCmd adds and removes blocklist entries: one operator
// command, or one batch of an import, per log entry. Version 1 payload:
//
//	count   uvarint  1 to MaxBlocklistChanges
//	per change:
//	  op      byte     1 = add (or replace), 2 = remove
//	  value   string   canonical entry (store.ParseBlockEntry)
//	  kind    byte     store.BlockKind, if add
//	  addedAt varint   Unix ms, if add
//	  reason  string   if add
//
// The decoder checks every value is canonical, so all replicas refuse a
// bad entry alike before it reaches the store.
type blocklistUpdateCmd struct {
	Changes []store.BlockChange
}

// MaxBlocklistChanges bounds one entry: even with 253-byte names and
// 200-byte reasons (463 bytes a change with its framing) an entry stays
// under the 1 MiB a forwarded command may take; imports send 1000 a batch
// by default.
const MaxBlocklistChanges = 2000

const (
	blockOpAdd    byte = 1
	blockOpRemove byte = 2
)

func (c *blocklistUpdateCmd) kind() cmdType { return cmdBlocklistUpdate }

func appendBlocklistUpdate(dst []byte, changes []store.BlockChange) []byte {
	return appendCommand(dst, &blocklistUpdateCmd{Changes: changes})
}

func (c *blocklistUpdateCmd) appendPayload(dst []byte) []byte {
	dst = appendUvarint(dst, uint64(len(c.Changes)))
	for i := range c.Changes {
		ch := &c.Changes[i]
		if ch.Remove {
			dst = append(dst, blockOpRemove)
			dst = appendString(dst, ch.Entry.Value)
			continue
		}
		dst = append(dst, blockOpAdd)
		dst = appendString(dst, ch.Entry.Value)
		dst = append(dst, byte(ch.Entry.Kind))
		dst = appendVarints(dst, ch.Entry.AddedAt)
		dst = appendString(dst, ch.Entry.Reason)
	}
	return dst
}

func decodeBlocklistUpdate(_ byte, b []byte) (command, error) {
	r := newReader(b)
	n := r.Uvarint()
	if n == 0 || n > MaxBlocklistChanges {
		return nil, corrupt("blocklist_update")
	}
	c := &blocklistUpdateCmd{Changes: make([]store.BlockChange, 0, n)}
	for range n {
		var ch store.BlockChange
		switch r.Byte() {
		case blockOpAdd:
			ch.Entry.Value = r.String()
			ch.Entry.Kind = store.BlockKind(r.Byte())
			ch.Entry.AddedAt = r.Varint()
			ch.Entry.Reason = r.String()
			if err := store.CheckBlockEntry(&ch.Entry); err != nil {
				return nil, invalid("blocklist_update", err)
			}
		case blockOpRemove:
			ch.Remove = true
			ch.Entry.Value = r.String()
			if v, err := store.ParseBlockEntry(ch.Entry.Value); err != nil || v != ch.Entry.Value {
				return nil, corrupt("blocklist_update")
			}
		default:
			return nil, corrupt("blocklist_update")
		}
		c.Changes = append(c.Changes, ch)
	}
	if !r.Done() {
		return nil, corrupt("blocklist_update")
	}
	return c, nil
}

func (c *blocklistUpdateCmd) apply(a *applier, _ uint64, res *applyResult) {
	if _, _, err := a.b.UpdateBlocklist(c.Changes); err != nil {
		a.reject(res, err)
	}
}

// UpdateBlocklist commits changes (at most MaxBlocklistChanges) through
// the log and waits until this node's store holds them, so the caller's
// next request here sees them.
func (n *Node) UpdateBlocklist(ctx context.Context, changes []store.BlockChange) (uint64, error) {
	if len(changes) == 0 || len(changes) > MaxBlocklistChanges {
		return 0, fmt.Errorf("cannot update blocklist: %d changes; send 1 to %d per update", len(changes), MaxBlocklistChanges)
	}
	res, err := n.apply(ctx, appendBlocklistUpdate(nil, changes))
	if err != nil {
		return 0, fmt.Errorf("cannot update blocklist: %w", err)
	}
	if res.Err != nil {
		return res.Index, res.Err
	}
	n.waitApplied(ctx, res.Index)
	return res.Index, nil
}
