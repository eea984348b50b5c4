package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/cockroachdb/pebble/v2"
)

// Shared dashboards (issue 13 point 6). A share is a read-only link,
// /share/{token}, to the stats of one site or one link. The token itself
// is never stored: table Z holds the share under the SHA-256 of the
// token's 16 random bytes, so a stolen replica opens no dashboard.
//
//	Z 'h' sha256(token)          -> share record
//	Z 't' kind target 0x00 id    -> sha256(token): the shares of a site or link
//
// The id is the hex of the hash's first 8 bytes, derived as API key ids
// are, so deleting by id needs no third table.

// ShareKind says what a share opens.
type ShareKind uint8

// The kinds; stored in records and carried in raft commands.
const (
	ShareSite ShareKind = 1
	ShareLink ShareKind = 2
)

func (k ShareKind) String() string {
	switch k {
	case ShareSite:
		return "site"
	case ShareLink:
		return "link"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Share is one shared dashboard.
type Share struct {
	ID     string // ShareID(Hash)
	Hash   KeyHash
	Owner  string
	Kind   ShareKind
	Target string // the site id, or the link's identifier (LinkID)
	Name   string
	// PasswordHash is the encoded password hash (argon2id, PHC string);
	// empty when the share needs no password.
	PasswordHash string
	CreatedAt    int64 // Unix ms
}

// ShareTokenLen is the number of random bytes in a share token.
const ShareTokenLen = 16

// ShareIDLen is the length of a share id: the hex of the hash's first 8 bytes.
const ShareIDLen = 16

// MaxSharesPerTarget bounds the shares of one site or link.
const MaxSharesPerTarget = 50

// MaxShareNameLen bounds a share's name, in bytes.
const MaxShareNameLen = 100

var (
	// ErrShareIDTaken means a new share's id is an existing share's: the
	// caller makes a new token and tries again.
	ErrShareIDTaken = errors.New("share id already taken")
	// ErrTooManyShares means the site or link has MaxSharesPerTarget shares.
	ErrTooManyShares = errors.New("too many shares")
)

// HashShareToken is the stored form of a token's random bytes.
func HashShareToken(token [ShareTokenLen]byte) KeyHash { return sha256.Sum256(token[:]) }

// ShareID is the public id of the share with hash h.
func ShareID(h KeyHash) string { return hex.EncodeToString(h[:ShareIDLen/2]) }

// CheckShare refuses a share the store cannot hold: an unknown kind, an
// empty or unindexable target or owner, a name too long or not UTF-8.
func CheckShare(s *Share) error {
	switch {
	case s.Kind != ShareSite && s.Kind != ShareLink:
		return fmt.Errorf("unknown share kind %d", s.Kind)
	case s.Owner == "" || s.Target == "":
		return errors.New("a share needs an owner and a target")
	case strings.IndexByte(s.Target, 0) >= 0 || len(s.Target) > 1+MaxDomainLen+64:
		return errors.New("bad share target")
	case len(s.Name) > MaxShareNameLen || !utf8.ValidString(s.Name):
		return fmt.Errorf("a share name is valid UTF-8 of at most %d bytes", MaxShareNameLen)
	}
	if s.PasswordHash != "" {
		if _, err := ParsePasswordHash(s.PasswordHash); err != nil { // the links' PHC argon2id form (gates.go)
			return err
		}
	}
	return CheckOwnerID(s.Owner)
}

const shareVersion = 1

// AppendShare encodes s (without its id, which the hash gives).
func AppendShare(dst []byte, s *Share) []byte {
	dst = append(dst, shareVersion, byte(s.Kind))
	dst = AppendString(dst, s.Owner)
	dst = AppendString(dst, s.Target)
	dst = AppendString(dst, s.Name)
	dst = AppendString(dst, s.PasswordHash)
	dst = appendVarint(dst, s.CreatedAt)
	return append(dst, s.Hash[:]...)
}

// DecodeShare decodes a record written by AppendShare.
func DecodeShare(b []byte, s *Share) error {
	r := NewFieldReader(b)
	if r.Byte() != shareVersion {
		return fmt.Errorf("cannot decode share: %w: unknown version", ErrCorrupt)
	}
	*s = Share{Kind: ShareKind(r.Byte()), Owner: r.String(), Target: r.String(), Name: r.String(), PasswordHash: r.String(), CreatedAt: r.Varint()}
	copy(s.Hash[:], r.Fixed(len(s.Hash)))
	if !r.Done() || CheckShare(s) != nil {
		return fmt.Errorf("cannot decode share: %w", ErrCorrupt)
	}
	s.ID = ShareID(s.Hash)
	return nil
}

func shareHashKey(h KeyHash) []byte { return append([]byte{tabShare, 'h'}, h[:]...) }

func shareTargetPrefix(kind ShareKind, target string) []byte {
	k := make([]byte, 0, 4+len(target))
	k = append(k, tabShare, 't', byte(kind))
	k = append(k, target...)
	return append(k, 0)
}

func shareTargetKey(kind ShareKind, target, id string) []byte {
	return append(shareTargetPrefix(kind, target), id...)
}

// ShareByHash returns the share whose token has hash h.
func (s *Store) ShareByHash(h KeyHash) (Share, bool, error) {
	var sh Share
	found, err := get(s.db, shareHashKey(h), func(v []byte) error { return DecodeShare(v, &sh) })
	if err != nil {
		return Share{}, false, fmt.Errorf("cannot read share: %w", err)
	}
	return sh, found, nil
}

// Shares lists the shares of one site or link, oldest first.
func (s *Store) Shares(kind ShareKind, target string) ([]Share, error) {
	return shares(s.db, kind, target)
}

func shares(r pebble.Reader, kind ShareKind, target string) ([]Share, error) {
	lower := shareTargetPrefix(kind, target)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		return nil, fmt.Errorf("cannot list shares: %w", storageErr(err))
	}
	var hashes []KeyHash
	for valid := it.First(); valid; valid = it.Next() {
		var h KeyHash
		if len(it.Value()) != len(h) {
			it.Close()
			return nil, fmt.Errorf("cannot list shares: %w", storageErr(ErrCorrupt))
		}
		copy(h[:], it.Value())
		hashes = append(hashes, h)
	}
	err = it.Error()
	it.Close()
	if err != nil {
		return nil, fmt.Errorf("cannot list shares: %w", storageErr(err))
	}
	out := make([]Share, 0, len(hashes))
	for _, h := range hashes {
		var sh Share
		found, err := get(r, shareHashKey(h), func(v []byte) error { return DecodeShare(v, &sh) })
		if err != nil {
			return nil, fmt.Errorf("cannot list shares: %w", err)
		}
		if found {
			out = append(out, sh)
		}
	}
	for i := 1; i < len(out); i++ { // insertion sort: a target has a few shares
		for j := i; j > 0 && (out[j].CreatedAt < out[j-1].CreatedAt || out[j].CreatedAt == out[j-1].CreatedAt && out[j].ID < out[j-1].ID); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out, nil
}

// CreateShare stores a new share. The caller (the edge, before the log)
// has checked that the owner owns the target; the store refuses an id
// already taken (ErrShareIDTaken) and a target with MaxSharesPerTarget
// shares (ErrTooManyShares).
func (b *Batch) CreateShare(s *Share) error {
	if err := CheckShare(s); err != nil {
		return fmt.Errorf("cannot create share: %w", err)
	}
	id := ShareID(s.Hash)
	existing, err := shares(b.b, s.Kind, s.Target)
	if err != nil {
		return err
	}
	for i := range existing {
		if existing[i].ID == id {
			return fmt.Errorf("cannot create share %s: %w", id, ErrShareIDTaken)
		}
	}
	if found, err := get(b.b, shareHashKey(s.Hash), func([]byte) error { return nil }); err != nil || found {
		if err == nil {
			err = ErrShareIDTaken
		}
		return fmt.Errorf("cannot create share %s: %w", id, err)
	}
	if len(existing) >= MaxSharesPerTarget {
		return fmt.Errorf("cannot create share on %s %q: %w (at most %d)", s.Kind, s.Target, ErrTooManyShares, MaxSharesPerTarget)
	}
	s.ID = id
	if err := b.set(shareHashKey(s.Hash), AppendShare(nil, s)); err != nil {
		return fmt.Errorf("cannot write share %s: %w", id, err)
	}
	if err := b.set(shareTargetKey(s.Kind, s.Target, id), append([]byte(nil), s.Hash[:]...)); err != nil {
		return fmt.Errorf("cannot write share %s: %w", id, err)
	}
	return nil
}

// DeleteShare removes the share id of one site or link and returns it. A
// non-empty owner must own it: another owner's share is ErrNotFound, like
// a missing one.
func (b *Batch) DeleteShare(owner string, kind ShareKind, target, id string) (Share, error) {
	var h KeyHash
	found, err := get(b.b, shareTargetKey(kind, target, id), func(v []byte) error {
		if len(v) != len(h) {
			return ErrCorrupt
		}
		copy(h[:], v)
		return nil
	})
	if err != nil {
		return Share{}, fmt.Errorf("cannot delete share %s: %w", id, err)
	}
	var sh Share
	if found {
		found, err = get(b.b, shareHashKey(h), func(v []byte) error { return DecodeShare(v, &sh) })
		if err != nil {
			return Share{}, fmt.Errorf("cannot delete share %s: %w", id, err)
		}
	}
	if !found || (owner != "" && sh.Owner != owner) || !bytes.Equal(sh.Hash[:], h[:]) {
		return Share{}, fmt.Errorf("cannot delete share %q: %w", id, ErrNotFound)
	}
	if err := b.b.Delete(shareHashKey(h), nil); err != nil {
		return Share{}, fmt.Errorf("cannot delete share %s: %w", id, storageErr(err))
	}
	if err := b.b.Delete(shareTargetKey(kind, target, id), nil); err != nil {
		return Share{}, fmt.Errorf("cannot delete share %s: %w", id, storageErr(err))
	}
	return sh, nil
}
