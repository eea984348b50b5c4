package node

import (
	"bytes"

	"github.com/waymark/waymark/raft"
	"github.com/waymark/waymark/store"
)

// freshWindow is how far past this replica's view of a region's counter a
// generated code may lie and still be one that was just created elsewhere:
// the blocks other nodes may have taken since this replica last applied.
const freshWindow = 64 * raft.DefaultBlockSize

// maybeFresh decides whether a local miss deserves a read-your-writes
// lookup at the leader. The leader itself never asks. Aliases cannot be
// checked locally, so they always may be fresh (the negative cache bounds
// the cost); a generated code may be fresh only if its ID lies within a few
// blocks of what this replica knows its region has allocated, so random
// guessing of codes does not turn into leader traffic.
func (n *Node) maybeFresh(code []byte) bool {
	if n.raft.IsLeader() {
		return false
	}
	if i := bytes.LastIndexByte(code, '/'); i >= 0 {
		code = code[i+1:] // a custom domain's "domain/code": judge the code
	}
	if len(code) != store.CodeLen {
		return true
	}
	p, err := n.raft.Permuter()
	if err != nil {
		return false
	}
	id, err := p.IDOf(code)
	if err != nil {
		return true // not base62: can only be an alias
	}
	slot := store.RegionOf(id)
	lo, _ := store.RegionRange(slot)
	counter, err := n.store.RegionCounter(slot)
	if err != nil {
		return false
	}
	return id-lo < counter+freshWindow
}
