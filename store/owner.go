package store

import (
	"crypto/sha256"
	"fmt"
)

// Owner is an account that owns links and sites.
type Owner struct {
	ID        string
	Name      string
	CreatedAt int64
}

// KeyHash is the SHA-256 of an API key; only the hash is ever stored.
type KeyHash [sha256.Size]byte

// HashAPIKey hashes an API key for storage and lookup. API keys are long
// random strings, so a plain hash is enough (no password stretching needed).
func HashAPIKey(key []byte) KeyHash { return sha256.Sum256(key) }

const ownerVersion = 1

// AppendOwner appends the encoding of o to dst.
func AppendOwner(dst []byte, o *Owner) []byte {
	dst = append(dst, ownerVersion)
	dst = AppendString(dst, o.ID)
	dst = AppendString(dst, o.Name)
	return appendVarint(dst, o.CreatedAt)
}

// DecodeOwner decodes a record written by AppendOwner.
func DecodeOwner(b []byte, o *Owner) error {
	r := NewFieldReader(b)
	if r.Byte() != ownerVersion {
		return fmt.Errorf("cannot decode owner: %w: unknown version", ErrCorrupt)
	}
	o.ID = r.String()
	o.Name = r.String()
	o.CreatedAt = r.Varint()
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
}

const siteVersion = 1

// AppendSite appends the encoding of s to dst.
func AppendSite(dst []byte, s *Site) []byte {
	dst = append(dst, siteVersion)
	dst = AppendString(dst, s.ID)
	dst = AppendString(dst, s.Domain)
	dst = AppendString(dst, s.Timezone)
	dst = AppendString(dst, s.Owner)
	return appendVarint(dst, s.CreatedAt)
}

// DecodeSite decodes a record written by AppendSite.
func DecodeSite(b []byte, s *Site) error {
	r := NewFieldReader(b)
	if r.Byte() != siteVersion {
		return fmt.Errorf("cannot decode site: %w: unknown version", ErrCorrupt)
	}
	s.ID = r.String()
	s.Domain = r.String()
	s.Timezone = r.String()
	s.Owner = r.String()
	s.CreatedAt = r.Varint()
	if !r.Done() {
		return fmt.Errorf("cannot decode site: %w", ErrCorrupt)
	}
	return nil
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
