package raft

import (
	"encoding/binary"

	"github.com/waymark/waymark/store"
)

// Payload fields are unsigned varints for counts and sizes, zigzag varints
// for times, and uvarint-length-prefixed bytes for strings. The log format
// is raft's own, not the store's record format, so either can change
// without breaking the other.

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBytes(dst []byte, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// reader decodes fields and remembers the first error, so decoders read as
// a straight list of fields and check once at the end. It never panics.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) uvarint() uint64 {
	if r.bad {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.bad {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) byte() byte {
	if r.bad || len(r.b) == 0 {
		r.bad = true
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// fixed reads exactly n raw bytes.
func (r *reader) fixed(n int) []byte {
	if r.bad || len(r.b) < n {
		r.bad = true
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.bad || n > uint64(len(r.b)) {
		r.bad = true
		return nil
	}
	return r.fixed(int(n))
}

func (r *reader) string() string { return string(r.bytes()) }

// done reports whether every field decoded and nothing trails.
func (r *reader) done() bool { return !r.bad && len(r.b) == 0 }

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
	l.Code = r.string()
	l.URL = r.string()
	l.Owner = r.string()
	l.CreatedAt = r.varint()
	l.UpdatedAt = r.varint()
	l.ExpiresAt = r.varint()
	l.ClickLimit = r.varint()
	l.Status = store.Status(r.byte())
	redirect := r.uvarint()
	if l.Code == "" || redirect > 999 || !store.ValidRedirect(int(redirect)) || !validStatus(l.Status) {
		r.bad = true
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
	copy(rec.RequestHash[:], r.fixed(len(rec.RequestHash)))
	status := r.uvarint()
	if status > 999 {
		r.bad = true
	}
	rec.Status = int(status)
	if resp := r.bytes(); len(resp) > 0 {
		rec.Response = append([]byte(nil), resp...)
	}
	rec.CreatedAt = r.varint()
}
