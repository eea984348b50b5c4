package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// Tags label an owner's links ("spring", "sms") for GET /v1/links?tag=.
// A tag is 1 to MaxTagLen characters of a-z, 0-9, '-' and '_' that start
// with a letter or digit; input is lower-cased first (ASCII only). A link
// holds at most MaxTags tags (a request may name no more), kept sorted and
// without duplicates, so a set of tags has one encoding.
const (
	MaxTags   = 10
	MaxTagLen = 32
)

// ErrInvalidTags means a set of tags breaks the rules above.
var ErrInvalidTags = errors.New("invalid tags")

// tagSep joins the tags of a link in its record; it is outside the tag
// alphabet.
const tagSep = ","

// NormalizeTags lower-cases, checks, sorts and deduplicates tags, and
// returns them in the form a Link holds ("" for none).
func NormalizeTags(tags []string) (string, error) {
	if len(tags) == 0 {
		return "", nil
	}
	if len(tags) > MaxTags {
		return "", fmt.Errorf("%w: %d tags, at most %d", ErrInvalidTags, len(tags), MaxTags)
	}
	out := make([]string, 0, len(tags))
	for _, t := range tags {
		n := strings.ToLower(t)
		if err := checkTag(n); err != nil {
			return "", fmt.Errorf("%w: tag %q %v", ErrInvalidTags, t, err)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	return strings.Join(out, tagSep), nil
}

// SplitTags returns the tags of a Link's Tags field (nil for none).
func SplitTags(tags string) []string {
	if tags == "" {
		return nil
	}
	return strings.Split(tags, tagSep)
}

// HasTag reports whether tags (a Link's Tags) holds tag.
func HasTag(tags, tag string) bool {
	for tags != "" {
		t, rest, _ := strings.Cut(tags, tagSep)
		if t == tag {
			return true
		}
		tags = rest
	}
	return false
}

// CheckTag reports whether t is one valid tag as stored (already lower
// case). The list API uses it for ?tag=.
func CheckTag(t string) error {
	if err := checkTag(t); err != nil {
		return fmt.Errorf("%w: tag %q %v", ErrInvalidTags, t, err)
	}
	return nil
}

func checkTag(t string) error {
	if t == "" || len(t) > MaxTagLen {
		return fmt.Errorf("must be 1 to %d characters", MaxTagLen)
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '-' || c == '_') && i > 0:
		default:
			return errors.New("may hold only a-z, 0-9, '-' and '_', and must start with a letter or digit")
		}
	}
	return nil
}

// checkStoredTags reports whether tags is exactly what NormalizeTags
// returns for its tags: the one form every record and command holds.
func checkStoredTags(tags string) bool {
	if tags == "" {
		return true
	}
	n, prev := 0, ""
	for rest, more := tags, true; more; {
		var t string
		t, rest, more = strings.Cut(rest, tagSep)
		if n++; n > MaxTags || checkTag(t) != nil || (n > 1 && prev >= t) {
			return false
		}
		prev = t
	}
	return true
}

// CheckStoredTags refuses tags not in normal form (command decoders call
// it, so a bad command is refused the same way on every replica).
func CheckStoredTags(tags string) error {
	if !checkStoredTags(tags) {
		return fmt.Errorf("%w: %q is not %d or fewer sorted, distinct, valid tags joined by %q", ErrInvalidTags, tags, MaxTags, tagSep)
	}
	return nil
}

// The tag index is G owner 0x00 tag 0x00 ^createIndex(be64) code -> empty:
// one key per tag of a link, in the owner index's order (newest first by
// the Raft index that created the link), so a listing by tag pages with
// the same cursor as a plain listing.

func tagIndexPrefix(owner, tag string) []byte {
	k := make([]byte, 0, len(owner)+len(tag)+3)
	k = append(k, tabTagIndex)
	k = append(k, owner...)
	k = append(k, 0)
	k = append(k, tag...)
	return append(k, 0)
}

func tagIndexKey(owner, tag string, createIndex uint64, code string) []byte {
	k := tagIndexPrefix(owner, tag)
	k = binary.BigEndian.AppendUint64(k, ^createIndex)
	return append(k, code...)
}

// putTagIndex adds (add) or removes the index keys of tags for a link.
func (b *Batch) putTagIndex(owner, code string, createIndex uint64, tags []string, add bool) error {
	for _, t := range tags {
		k := tagIndexKey(owner, t, createIndex, code)
		var err error
		if add {
			err = b.set(k, nil)
		} else if err = b.b.Delete(k, nil); err != nil {
			err = storageErr(err)
		}
		if err != nil {
			return fmt.Errorf("cannot index tag %q of link %q: %w", t, code, err)
		}
	}
	return nil
}

// retag moves a link's tag index keys from old to new tags: the keys of
// tags it lost go, the keys of tags it gained come, in the batch of the
// edit.
func (b *Batch) retag(l *Link, oldTags, newTags string) error {
	if oldTags == newTags {
		return nil
	}
	old, new := SplitTags(oldTags), SplitTags(newTags)
	createIndex, err := b.createIndexOf(l.Code, l.Owner)
	if err != nil {
		return err
	}
	var gone, came []string
	for _, t := range old {
		if !slices.Contains(new, t) {
			gone = append(gone, t)
		}
	}
	for _, t := range new {
		if !slices.Contains(old, t) {
			came = append(came, t)
		}
	}
	if err := b.putTagIndex(l.Owner, l.Code, createIndex, gone, false); err != nil {
		return err
	}
	return b.putTagIndex(l.Owner, l.Code, createIndex, came, true)
}

// createIndexOf finds the Raft index that created code: the index of its
// first history record (CreateLink writes it), or for a link older than
// the history, its key in the owner index (a scan of the owner's links,
// which only such a link ever needs).
func (b *Batch) createIndexOf(code, owner string) (uint64, error) {
	prefix := historyPrefix(code)
	it, err := b.b.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return 0, fmt.Errorf("cannot find the creation of link %q: %w", code, storageErr(err))
	}
	if it.First() {
		k := it.Key()[len(prefix):]
		var idx uint64
		ok := len(k) == 9
		if ok {
			idx = binary.BigEndian.Uint64(k)
		}
		it.Close()
		if !ok {
			return 0, fmt.Errorf("cannot find the creation of link %q: %w", code, storageErr(ErrCorrupt))
		}
		return idx, nil
	}
	if err := it.Close(); err != nil {
		return 0, fmt.Errorf("cannot find the creation of link %q: %w", code, storageErr(err))
	}
	oprefix := ownerIndexPrefix(owner)
	it, err = b.b.NewIter(&pebble.IterOptions{LowerBound: oprefix, UpperBound: prefixEnd(oprefix)})
	if err != nil {
		return 0, fmt.Errorf("cannot find the creation of link %q: %w", code, storageErr(err))
	}
	defer it.Close()
	for valid := it.First(); valid; valid = it.Next() {
		k := it.Key()[len(oprefix):]
		if len(k) > 8 && string(k[8:]) == code {
			return ^binary.BigEndian.Uint64(k), nil
		}
	}
	if err := it.Error(); err != nil {
		return 0, fmt.Errorf("cannot find the creation of link %q: %w", code, storageErr(err))
	}
	return 0, fmt.Errorf("cannot find the creation of link %q: %w: not in its owner's index", code, storageErr(ErrCorrupt))
}
