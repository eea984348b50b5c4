package node

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
)

// operatorRemovals remembers the members an operator took out of Raft
// (`waymark raft remove-peer`), so the reconciler does not put one back
// only because gossip has not noticed yet that it died: remove-peer right
// after a node is killed would otherwise be undone within a pass. A
// removed member is let back in once it restarts, which gossip shows as a
// new Boot id. The record lives on the leader that ran the removal; after
// a change of leader, the dead member is removed again by the dead-member
// rule.
type operatorRemovals struct {
	mu     sync.Mutex
	boot   map[string]string // member name -> Boot id gossip showed at removal
	logged map[string]bool
}

func newOperatorRemovals() *operatorRemovals {
	return &operatorRemovals{boot: map[string]string{}, logged: map[string]bool{}}
}

func (o *operatorRemovals) hold(name, boot string) {
	o.mu.Lock()
	o.boot[name] = boot
	delete(o.logged, name)
	o.mu.Unlock()
}

func (o *operatorRemovals) release(name string) {
	o.mu.Lock()
	delete(o.boot, name)
	delete(o.logged, name)
	o.mu.Unlock()
}

// held reports whether m is the same process an operator removed, and
// whether this is the first time it was asked (to log once). A member
// that has restarted since is forgotten.
func (o *operatorRemovals) held(m Member) (held, first bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	boot, ok := o.boot[m.Name]
	if !ok {
		return false, false
	}
	if boot != m.Boot {
		delete(o.boot, m.Name)
		delete(o.logged, m.Name)
		return false, false
	}
	first = !o.logged[m.Name]
	o.logged[m.Name] = true
	return true, first
}

// newBootID names one start of this process.
func newBootID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
