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
	dst = appendString(dst, o.ID)
	dst = appendString(dst, o.Name)
	return appendVarint(dst, o.CreatedAt)
}

// DecodeOwner decodes a record written by AppendOwner.
func DecodeOwner(b []byte, o *Owner) error {
	r := reader{b: b}
	if r.byte() != ownerVersion {
		return fmt.Errorf("cannot decode owner: %w: unknown version", ErrCorrupt)
	}
	o.ID = r.string()
	o.Name = r.string()
	o.CreatedAt = r.varint()
	if !r.done() {
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
	dst = appendString(dst, s.ID)
	dst = appendString(dst, s.Domain)
	dst = appendString(dst, s.Timezone)
	dst = appendString(dst, s.Owner)
	return appendVarint(dst, s.CreatedAt)
}

// DecodeSite decodes a record written by AppendSite.
func DecodeSite(b []byte, s *Site) error {
	r := reader{b: b}
	if r.byte() != siteVersion {
		return fmt.Errorf("cannot decode site: %w: unknown version", ErrCorrupt)
	}
	s.ID = r.string()
	s.Domain = r.string()
	s.Timezone = r.string()
	s.Owner = r.string()
	s.CreatedAt = r.varint()
	if !r.done() {
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
	dst = appendBytes(dst, rec.Response)
	return appendVarint(dst, rec.CreatedAt)
}

// DecodeIdempotency decodes a record written by AppendIdempotency.
func DecodeIdempotency(b []byte, rec *Idempotency) error {
	r := reader{b: b}
	if r.byte() != idempotencyVersion || len(r.b) < 32 {
		return fmt.Errorf("cannot decode idempotency record: %w", ErrCorrupt)
	}
	copy(rec.RequestHash[:], r.b[:32])
	r.b = r.b[32:]
	rec.Status = int(r.uvarint())
	rec.Response = append([]byte(nil), r.bytes()...)
	rec.CreatedAt = r.varint()
	if !r.done() {
		return fmt.Errorf("cannot decode idempotency record: %w", ErrCorrupt)
	}
	return nil
}
