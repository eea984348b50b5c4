package store

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// External ids make a bulk create idempotent per item: an item that names
// an external_id its owner already used answers the link made for it the
// first time instead of making another. The X table maps them to codes:
//
//	X owner 0x00 external_id -> code
//
// A record is never deleted with its link (a disabled link keeps its
// code, so a rerun of an import must still find it), and never expires.

// MaxExternalIDLen bounds an external id, so the X key stays small.
const MaxExternalIDLen = 256

// CheckExternalID refuses an external id the X table cannot hold.
func CheckExternalID(id string) error {
	if len(id) > MaxExternalIDLen {
		return fmt.Errorf("external_id is %d bytes; the limit is %d", len(id), MaxExternalIDLen)
	}
	return nil
}

func externalIDKey(owner, id string) []byte {
	k := make([]byte, 0, len(owner)+len(id)+2)
	k = append(k, tabExternalID)
	k = append(k, owner...)
	k = append(k, 0)
	return append(k, id...)
}

// BulkItem is one link of a bulk create; ExternalID may be empty.
type BulkItem struct {
	Link       Link
	ExternalID string
}

// BulkResult is the answer to one BulkItem: the link made, or with
// Existing the link its external id already named, or Err (a refusal such
// as ErrCodeTaken for that item alone).
type BulkResult struct {
	Link     Link
	Existing bool
	Err      error
}

// ExternalID returns the code owner's external id names, as of the batch.
func (b *Batch) ExternalID(owner, id string) (string, bool, error) {
	return externalID(b.b, owner, id)
}

// ExternalID returns the code owner's external id names.
func (s *Store) ExternalID(owner, id string) (string, bool, error) {
	return externalID(s.db, owner, id)
}

func externalID(r pebble.Reader, owner, id string) (string, bool, error) {
	var code string
	found, err := get(r, externalIDKey(owner, id), func(v []byte) error {
		if len(v) == 0 {
			return fmt.Errorf("%w: empty external id record", ErrCorrupt)
		}
		code = string(v)
		return nil
	})
	if err != nil {
		return "", false, fmt.Errorf("cannot read external id %q: %w", id, err)
	}
	return code, found, nil
}

// PutExternalID records that owner's external id names code.
func (b *Batch) PutExternalID(owner, id, code string) error {
	if err := checkOwnerID(owner); err != nil {
		return fmt.Errorf("cannot write external id: %w", err)
	}
	if err := CheckExternalID(id); err != nil {
		return fmt.Errorf("cannot write external id: %w", err)
	}
	if id == "" || code == "" {
		return errors.New("cannot write external id: id and code must not be empty")
	}
	if err := b.set(externalIDKey(owner, id), []byte(code)); err != nil {
		return fmt.Errorf("cannot write external id %q: %w", id, err)
	}
	return nil
}

// EachLink calls fn with every link of owner, oldest first, from one
// consistent view of the store, holding one link at a time: an export
// streams through it however many links the owner has. fn's error stops
// the walk and is returned. The Link is reused between calls.
func (s *Store) EachLink(owner string, fn func(*Link) error) error {
	snap := s.db.NewSnapshot()
	defer snap.Close()
	prefix := ownerIndexPrefix(owner)
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return fmt.Errorf("cannot walk links: %w", storageErr(err))
	}
	defer it.Close()
	var l Link
	// The index holds ^index, newest first: walk it backwards for
	// creation order, so an import of the export recreates the links in
	// the order they were made.
	for valid := it.Last(); valid; valid = it.Prev() {
		k := it.Key()
		if len(k) < len(prefix)+8 {
			return fmt.Errorf("cannot walk links: %w: index key %q", ErrCorrupt, k)
		}
		found, err := get(snap, linkKey(nil, k[len(prefix)+8:]), func(v []byte) error { return DecodeLink(v, &l) })
		if err != nil {
			return fmt.Errorf("cannot walk links: %w", err)
		}
		if !found || l.Owner != owner {
			continue
		}
		if err := fn(&l); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("cannot walk links: %w", storageErr(err))
	}
	return nil
}
