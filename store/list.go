package store

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// ListLinks returns up to limit of owner's links, newest first, starting
// after cursor (empty for the first page). next is empty on the last page.
func (s *Store) ListLinks(owner, cursor string, limit int) (links []Link, next string, err error) {
	return s.SearchLinks(LinkQuery{Owner: owner, Cursor: cursor, Limit: limit})
}

// Sites returns every registered site; nodes hold them all in memory.
func (s *Store) Sites() ([]Site, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tabSite}, UpperBound: []byte{tabSite + 1}})
	if err != nil {
		return nil, fmt.Errorf("cannot list sites: %w", err)
	}
	defer it.Close()
	var sites []Site
	for valid := it.First(); valid; valid = it.Next() {
		var st Site
		if err := DecodeSite(it.Value(), &st); err != nil {
			return nil, err
		}
		sites = append(sites, st)
	}
	return sites, it.Error()
}

// Site returns the site with the given id.
func (s *Store) Site(id string) (Site, bool, error) {
	var st Site
	found, err := get(s.db, siteKey(id), func(v []byte) error { return DecodeSite(v, &st) })
	if err != nil {
		return Site{}, false, fmt.Errorf("cannot read site %q: %w", id, err)
	}
	return st, found, nil
}
