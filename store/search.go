package store

import (
	"encoding/base64"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// A listing cursor names a position in an owner's links: the suffix of an
// owner index key, ^createIndex(be64) then the code, base64url without
// padding. The owner index and the tag index share that order (newest
// first by the Raft index that created the link), so one cursor works for
// every filter. A page starts strictly after its cursor. Links created
// later have higher indexes and sort before every handed-out cursor, so
// concurrent creates never shift, repeat or hide a link on later pages.
const (
	// maxCursorCode bounds the code in a cursor; codes and aliases are
	// far shorter.
	maxCursorCode = 64
	// DefaultScanLimit bounds the index entries one filtered page reads,
	// so a filter that matches few links costs a bounded read per page:
	// the page then holds fewer links than asked (maybe none) and a
	// cursor to go on from.
	DefaultScanLimit = 10000
)

// EncodeCursor returns the cursor of a position (an index key suffix).
func EncodeCursor(pos []byte) string { return base64.RawURLEncoding.EncodeToString(pos) }

// DecodeCursor returns the position a cursor names: 8 bytes of index and
// a code of 1 to 64 code characters. Anything else is ErrCorrupt.
func DecodeCursor(cursor string) ([]byte, error) {
	pos, err := base64.RawURLEncoding.Strict().DecodeString(cursor)
	// The decoder skips \r and \n; one position, one cursor.
	if err != nil || len(pos) < 9 || len(pos) > 8+maxCursorCode || EncodeCursor(pos) != cursor {
		return nil, fmt.Errorf("%w: bad cursor", ErrCorrupt)
	}
	for _, c := range pos[8:] {
		// Codes and aliases are A-Z, a-z, 0-9, '_' and '-'.
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return nil, fmt.Errorf("%w: bad cursor", ErrCorrupt)
		}
	}
	return pos, nil
}

// LinkQuery selects a page of an owner's links.
type LinkQuery struct {
	Owner  string
	Tag    string           // only links with this tag (through the tag index); "" for all
	Match  func(*Link) bool // a further filter (substring, domain); nil keeps all
	Cursor string           // "" for the first page
	Limit  int
	// ScanLimit bounds the index entries read when Match is set; 0 means
	// DefaultScanLimit.
	ScanLimit int
}

// SearchLinks returns up to q.Limit links that pass the query, newest
// first, and the cursor of the next page (empty on the last page).
func (s *Store) SearchLinks(q LinkQuery) (links []Link, next string, err error) {
	var prefix []byte
	if q.Tag != "" {
		if err := CheckTag(q.Tag); err != nil {
			return nil, "", fmt.Errorf("cannot list links: %w", err)
		}
		prefix = tagIndexPrefix(q.Owner, q.Tag)
	} else {
		prefix = ownerIndexPrefix(q.Owner)
	}
	lower := prefix
	if q.Cursor != "" {
		pos, err := DecodeCursor(q.Cursor)
		if err != nil {
			return nil, "", fmt.Errorf("cannot list links: %w", err)
		}
		lower = append(append(append([]byte(nil), prefix...), pos...), 0) // strictly after
	}
	scanLimit := -1 // unbounded: every entry of a plain listing is a result
	if q.Match != nil {
		if scanLimit = q.ScanLimit; scanLimit <= 0 {
			scanLimit = DefaultScanLimit
		}
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, "", fmt.Errorf("cannot list links: %w", storageErr(err))
	}
	defer it.Close()
	scanned := 0
	for valid := it.First(); valid && q.Limit > 0; valid = it.Next() {
		k := it.Key()
		if len(k) < len(prefix)+9 {
			return nil, "", fmt.Errorf("cannot list links: %w: index key %q", storageErr(ErrCorrupt), k)
		}
		scanned++
		var l Link
		found, err := s.GetLink(k[len(prefix)+8:], &l)
		if err != nil {
			return nil, "", err
		}
		// The owner and tag checks never fail; they guard invariant 6 and
		// the tag index against a stale key.
		ok := found && l.Owner == q.Owner && (q.Tag == "" || HasTag(l.Tags, q.Tag)) && (q.Match == nil || q.Match(&l))
		if ok {
			links = append(links, l)
		}
		if len(links) == q.Limit || scanned == scanLimit {
			// Encode the cursor before Next: Next may overwrite k. Only
			// hand it out when there is something after it.
			cursor := EncodeCursor(k[len(prefix):])
			if it.Next() {
				next = cursor
			}
			break
		}
	}
	if err := it.Error(); err != nil {
		return nil, "", fmt.Errorf("cannot list links: %w", storageErr(err))
	}
	return links, next, nil
}
