package raft

import (
	"encoding/binary"

	"github.com/waymark/waymark/store"
)

// Payload fields are unsigned varints for counts and sizes, zigzag varints
// for times, and uvarint-length-prefixed bytes for strings. The log format
// is raft's own, not the store's record format, so either can change
// without breaking the other.

func appendString(dst []byte, s string) []byte { return store.AppendString(dst, s) }

func appendBytes(dst []byte, b []byte) []byte { return store.AppendBytes(dst, b) }

// reader is the store's field reader plus the link fields commands and
// forwarded results share.
type reader struct {
	store.FieldReader
}

func newReader(b []byte) *reader { return &reader{store.NewFieldReader(b)} }

func appendUvarint(dst []byte, v uint64) []byte { return binary.AppendUvarint(dst, v) }

func appendVarints(dst []byte, vs ...int64) []byte {
	for _, v := range vs {
		dst = binary.AppendVarint(dst, v)
	}
	return dst
}

// appendLinkFields appends a link's fields except Index: in a command the
// index is the entry's own, in a forwarded result it follows separately.
func appendLinkFields(dst []byte, l *store.Link) []byte {
	dst = appendString(dst, l.Code)
	dst = appendString(dst, l.URL)
	dst = appendString(dst, l.Owner)
	dst = appendVarints(dst, l.CreatedAt, l.UpdatedAt, l.ExpiresAt, l.ClickLimit)
	dst = append(dst, byte(l.Status))
	return appendUvarint(dst, uint64(l.Redirect))
}

// linkFields reads what appendLinkFields wrote. An empty code, or a status
// or redirect this build does not know, marks r bad.
func (r *reader) linkFields(l *store.Link) {
	l.Code = r.String()
	l.URL = r.String()
	l.Owner = r.String()
	l.CreatedAt = r.Varint()
	l.UpdatedAt = r.Varint()
	l.ExpiresAt = r.Varint()
	l.ClickLimit = r.Varint()
	l.Status = store.Status(r.Byte())
	redirect := r.Uvarint()
	if l.Code == "" || redirect > 999 || !store.ValidRedirect(int(redirect)) || !validStatus(l.Status) {
		r.Fail()
		return
	}
	l.Redirect = uint16(redirect)
}

// appendIdempotency appends an idempotency record.
func appendIdempotency(dst []byte, rec *store.Idempotency) []byte {
	dst = append(dst, rec.RequestHash[:]...)
	dst = appendUvarint(dst, uint64(rec.Status))
	dst = appendBytes(dst, rec.Response)
	return appendVarints(dst, rec.CreatedAt)
}

// idempotency reads what appendIdempotency wrote.
func (r *reader) idempotency(rec *store.Idempotency) {
	copy(rec.RequestHash[:], r.Fixed(len(rec.RequestHash)))
	status := r.Uvarint()
	if status > 999 {
		r.Fail()
	}
	rec.Status = int(status)
	if resp := r.Bytes(); len(resp) > 0 {
		rec.Response = append([]byte(nil), resp...)
	}
	rec.CreatedAt = r.Varint()
}
