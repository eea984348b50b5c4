package edge

import (
	"sync"
	"sync/atomic"
)

// OwnerSet is the in-memory set of suspended owners that every node keeps
// from its replica: the node loads it from the store before raft replays
// anything, the FSM changes it with every suspension it applies, and a
// snapshot restore replaces it. The redirect path and API authentication
// read it on every request, so a read is one atomic load (and, only while
// some owner is suspended, a map lookup that does not allocate); writers
// copy the map, which is fine for the few owners ever suspended.
type OwnerSet struct {
	mu sync.Mutex                          // serialises writers
	m  atomic.Pointer[map[string]struct{}] // nil when empty
}

// NewOwnerSet returns an empty set.
func NewOwnerSet() *OwnerSet { return &OwnerSet{} }

// Has reports whether owner is in the set.
func (s *OwnerSet) Has(owner string) bool {
	m := s.m.Load()
	if m == nil {
		return false
	}
	_, ok := (*m)[owner]
	return ok
}

// Len is how many owners are in the set.
func (s *OwnerSet) Len() int {
	if m := s.m.Load(); m != nil {
		return len(*m)
	}
	return 0
}

// Set adds owner to the set (in true) or removes it.
func (s *OwnerSet) Set(owner string, in bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.m.Load()
	if old != nil {
		if _, ok := (*old)[owner]; ok == in {
			return
		}
	} else if !in {
		return
	}
	next := make(map[string]struct{}, s.Len()+1)
	if old != nil {
		for k := range *old {
			next[k] = struct{}{}
		}
	}
	if in {
		next[owner] = struct{}{}
	} else {
		delete(next, owner)
	}
	s.store(next)
}

// Replace makes the set exactly owners.
func (s *OwnerSet) Replace(owners []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := make(map[string]struct{}, len(owners))
	for _, o := range owners {
		next[o] = struct{}{}
	}
	s.store(next)
}

func (s *OwnerSet) store(m map[string]struct{}) {
	if len(m) == 0 {
		s.m.Store(nil)
		return
	}
	s.m.Store(&m)
}
