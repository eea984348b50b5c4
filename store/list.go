package store

import (
	"encoding/base64"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// ListLinks returns up to limit of owner's links, newest first, starting
// after cursor (empty for the first page). next is empty on the last page.
func (s *Store) ListLinks(owner, cursor string, limit int) (links []Link, next string, err error) {
	prefix := ownerIndexPrefix(owner)
	lower := prefix
	if cursor != "" {
		after, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || len(after) < 8 {
			return nil, "", fmt.Errorf("cannot list links: %w: bad cursor", ErrCorrupt)
		}
		lower = append(append(append([]byte(nil), prefix...), after...), 0) // strictly after
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, "", fmt.Errorf("cannot list links: %w", err)
	}
	defer it.Close()
	for valid := it.First(); valid && len(links) < limit; valid = it.Next() {
		k := it.Key()
		if len(k) < len(prefix)+8 {
			return nil, "", fmt.Errorf("cannot list links: %w: index key %q", ErrCorrupt, k)
		}
		code := k[len(prefix)+8:]
		var l Link
		found, err := s.GetLink(code, &l)
		if err != nil {
			return nil, "", err
		}
		if !found || l.Owner != owner { // the second never happens; it guards invariant 6
			continue
		}
		links = append(links, l)
		if len(links) == limit {
			// Encode the cursor before Next: Next may overwrite k. Only hand
			// it out when there is something after it.
			cursor := base64.RawURLEncoding.EncodeToString(k[len(prefix):])
			if it.Next() {
				next = cursor
			}
			break
		}
	}
	if err := it.Error(); err != nil {
		return nil, "", fmt.Errorf("cannot list links: %w", err)
	}
	return links, next, nil
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
