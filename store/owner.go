package store

import (
	"crypto/sha256"
	"errors"
	"fmt"
)

// Owner is an account that owns links and sites.
type Owner struct {
	ID        string
	Name      string
	CreatedAt int64
	// Suspension (suspend.go): while Suspended, every link of the owner
	// answers 410 and its API keys 401. SuspendedAt (Unix ms) and
	// SuspendReason say when and why; all three are zero otherwise.
	Suspended     bool
	SuspendedAt   int64
	SuspendReason string
}

// KeyHash is the SHA-256 of an API key; only the hash is ever stored.
type KeyHash [sha256.Size]byte

// HashAPIKey hashes an API key for storage and lookup. API keys are long
// random strings, so a plain hash is enough (no password stretching needed).
func HashAPIKey(key []byte) KeyHash { return sha256.Sum256(key) }

// Owner record versions. Version 1 is an owner that is not suspended;
// version 2 adds the suspension (flags byte, time, reason). An owner that
// is not suspended is still written as version 1 (and a version 2 record
// without the flag is refused), so each owner has one encoding and a node
// that only knows version 1 reads every owner that was never suspended
// or has been unsuspended.
const (
	ownerVersion1 = 1
	ownerVersion2 = 2
)

// The one bit of a version 2 owner's flags byte.
const ownerFlagSuspended byte = 1 << 0

// AppendOwner appends the encoding of o to dst.
func AppendOwner(dst []byte, o *Owner) []byte {
	if o.Suspended {
		dst = append(dst, ownerVersion2)
	} else {
		dst = append(dst, ownerVersion1)
	}
	dst = AppendString(dst, o.ID)
	dst = AppendString(dst, o.Name)
	dst = appendVarint(dst, o.CreatedAt)
	if !o.Suspended {
		return dst
	}
	dst = append(dst, ownerFlagSuspended)
	dst = appendVarint(dst, o.SuspendedAt)
	return AppendString(dst, o.SuspendReason)
}

// DecodeOwner decodes a record written by AppendOwner.
func DecodeOwner(b []byte, o *Owner) error {
	r := NewFieldReader(b)
	version := r.Byte()
	if version != ownerVersion1 && version != ownerVersion2 {
		return fmt.Errorf("cannot decode owner: %w: unknown version", ErrCorrupt)
	}
	*o = Owner{}
	o.ID = r.String()
	o.Name = r.String()
	o.CreatedAt = r.Varint()
	if version == ownerVersion2 {
		if flags := r.Byte(); flags != ownerFlagSuspended {
			// Only the suspension makes a version 2 record; unknown bits
			// are a newer writer's, not ours to guess at.
			return fmt.Errorf("cannot decode owner: %w: flags %#x", ErrCorrupt, flags)
		}
		o.Suspended = true
		o.SuspendedAt = r.Varint()
		o.SuspendReason = r.String()
	}
	if !r.Done() {
		return fmt.Errorf("cannot decode owner: %w", ErrCorrupt)
	}
	return nil
}

// Site is a website registered for pageview analytics.
type Site struct {
	ID        string
	Domain    string
	Timezone  string
	Owner     string
	CreatedAt int64
	// IgnoreDNT makes ingest store this site's events even when the
	// browser sends DNT: 1 or Sec-GPC: 1. The zero value honours them.
	IgnoreDNT bool
	// Goals are the site's conversions, at most MaxGoals, in the order they
	// were added. Nil when there are none.
	Goals []Goal
}

// Goal returns the site's goal with the given id.
func (s *Site) Goal(id string) (Goal, bool) {
	for _, g := range s.Goals {
		if g.ID == id {
			return g, true
		}
	}
	return Goal{}, false
}

// Site record versions. Version 1 is a site without privacy settings or
// goals; version 2 adds a flags byte and the goal list. A site that uses
// neither is still written as version 1 (and a version 2 record without
// them is refused), so each site has one encoding and a node that only
// knows version 1 can read every site that does not use the new fields.
const (
	siteVersion1 = 1
	siteVersion2 = 2
)

// Bits of a version 2 site's flags byte.
const (
	siteFlagIgnoreDNT byte = 1 << iota
	siteKnownFlags         = siteFlagIgnoreDNT
)

// AppendSite appends the encoding of s to dst.
func AppendSite(dst []byte, s *Site) []byte {
	v2 := s.IgnoreDNT || len(s.Goals) > 0
	if v2 {
		dst = append(dst, siteVersion2)
	} else {
		dst = append(dst, siteVersion1)
	}
	dst = AppendString(dst, s.ID)
	dst = AppendString(dst, s.Domain)
	dst = AppendString(dst, s.Timezone)
	dst = AppendString(dst, s.Owner)
	dst = appendVarint(dst, s.CreatedAt)
	if !v2 {
		return dst
	}
	var flags byte
	if s.IgnoreDNT {
		flags |= siteFlagIgnoreDNT
	}
	dst = append(dst, flags)
	dst = appendUvarint(dst, uint64(len(s.Goals)))
	for i := range s.Goals {
		dst = AppendGoal(dst, &s.Goals[i])
	}
	return dst
}

// AppendGoal appends a goal's four strings; the raft command format
// shares it.
func AppendGoal(dst []byte, g *Goal) []byte {
	dst = AppendString(dst, g.ID)
	dst = AppendString(dst, g.EventName)
	dst = AppendString(dst, g.PagePath)
	return AppendString(dst, g.DisplayName)
}

// Goal reads what AppendGoal wrote. It does not check the goal.
func (r *FieldReader) Goal(g *Goal) {
	g.ID = r.String()
	g.EventName = r.String()
	g.PagePath = r.String()
	g.DisplayName = r.String()
}

// DecodeSite decodes a record written by AppendSite.
func DecodeSite(b []byte, s *Site) error {
	r := NewFieldReader(b)
	version := r.Byte()
	if version != siteVersion1 && version != siteVersion2 {
		return fmt.Errorf("cannot decode site: %w: unknown version", ErrCorrupt)
	}
	*s = Site{}
	s.ID = r.String()
	s.Domain = r.String()
	s.Timezone = r.String()
	s.Owner = r.String()
	s.CreatedAt = r.Varint()
	if version == siteVersion2 {
		if err := r.siteSettings(s); err != nil {
			return fmt.Errorf("cannot decode site %q: %w: %w", s.ID, ErrCorrupt, err)
		}
	}
	if !r.Done() {
		return fmt.Errorf("cannot decode site: %w", ErrCorrupt)
	}
	return nil
}

// siteSettings reads a version 2 site's flags and goals.
func (r *FieldReader) siteSettings(s *Site) error {
	flags := r.Byte()
	n := r.Uvarint()
	switch {
	case r.bad:
		return errors.New("truncated")
	case flags&^siteKnownFlags != 0:
		return fmt.Errorf("unknown flags %#x", flags)
	case n > MaxGoals:
		return fmt.Errorf("%d goals", n)
	case flags == 0 && n == 0:
		return errors.New("version 2 without settings or goals")
	}
	s.IgnoreDNT = flags&siteFlagIgnoreDNT != 0
	if n > 0 {
		s.Goals = make([]Goal, n)
		for i := range s.Goals {
			r.Goal(&s.Goals[i])
		}
		if r.bad {
			return errors.New("truncated goal")
		}
	}
	return CheckGoals(s.Goals)
}

// Idempotency remembers the answer to a create made with an
// Idempotency-Key, so a retried request gets the same answer.
type Idempotency struct {
	RequestHash [32]byte
	Status      int
	Response    []byte
	CreatedAt   int64
}

// IdempotencyTTL is how long an idempotency record is honoured, in ms.
const IdempotencyTTL = 24 * 60 * 60 * 1000

const idempotencyVersion = 1

// AppendIdempotency appends the encoding of rec to dst.
func AppendIdempotency(dst []byte, rec *Idempotency) []byte {
	dst = append(dst, idempotencyVersion)
	dst = append(dst, rec.RequestHash[:]...)
	dst = appendUvarint(dst, uint64(rec.Status))
	dst = AppendBytes(dst, rec.Response)
	return appendVarint(dst, rec.CreatedAt)
}

// DecodeIdempotency decodes a record written by AppendIdempotency.
func DecodeIdempotency(b []byte, rec *Idempotency) error {
	r := NewFieldReader(b)
	if r.Byte() != idempotencyVersion {
		return fmt.Errorf("cannot decode idempotency record: %w", ErrCorrupt)
	}
	copy(rec.RequestHash[:], r.Fixed(len(rec.RequestHash)))
	rec.Status = int(r.Uvarint())
	rec.Response = append([]byte(nil), r.Bytes()...)
	rec.CreatedAt = r.Varint()
	if !r.Done() {
		return fmt.Errorf("cannot decode idempotency record: %w", ErrCorrupt)
	}
	return nil
}
