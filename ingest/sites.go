package ingest

import (
	"sync"
	"sync/atomic"

	"github.com/waymark/waymark/store"
)

// Sites is the in-memory table of registered sites, looked up by domain on
// every /api/event. The node keeps it current from the replicated store
// (Put on create or change, Remove on delete). Reads take no lock: writers
// copy the map and swap it, which suits a table that changes rarely.
type Sites struct {
	mu       sync.Mutex // serialises writers
	byDomain atomic.Pointer[map[string]store.Site]
}

// NewSites returns an empty table.
func NewSites() *Sites {
	s := &Sites{}
	m := map[string]store.Site{}
	s.byDomain.Store(&m)
	return s
}

// Put adds or replaces a site. A site whose domain changed loses its old
// domain.
func (s *Sites) Put(site store.Site) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.byDomain.Load()
	m := make(map[string]store.Site, len(old)+1)
	for d, st := range old {
		if st.ID != site.ID {
			m[d] = st
		}
	}
	m[normalizeDomain(site.Domain)] = site
	s.byDomain.Store(&m)
}

// Remove deletes the site with the given id.
func (s *Sites) Remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.byDomain.Load()
	m := make(map[string]store.Site, len(old))
	for d, st := range old {
		if st.ID != id {
			m[d] = st
		}
	}
	s.byDomain.Store(&m)
}

// Replace makes the table exactly all (after a snapshot restore replaced
// the store, sites registered before it may be gone).
func (s *Sites) Replace(all []store.Site) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]store.Site, len(all))
	for _, site := range all {
		m[normalizeDomain(site.Domain)] = site
	}
	s.byDomain.Store(&m)
}

// Lookup finds the site registered for a domain ("www." and case ignored).
func (s *Sites) Lookup(domain string) (store.Site, bool) {
	st, ok := (*s.byDomain.Load())[normalizeDomain(domain)]
	return st, ok
}

// Len returns the number of sites.
func (s *Sites) Len() int { return len(*s.byDomain.Load()) }
