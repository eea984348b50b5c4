package store

import "encoding/binary"

// Record encodings are a version byte followed by fields in a fixed order:
// unsigned varints for integers and varint-length-prefixed bytes for strings.
// Decoders never panic on bad input; they return ErrCorrupt. Every record
// has exactly one encoding: overlong varints and out-of-range fields are
// rejected, so decode followed by encode gives back the input bytes.

func appendUvarint(dst []byte, v uint64) []byte { return binary.AppendUvarint(dst, v) }

func appendVarint(dst []byte, v int64) []byte { return binary.AppendVarint(dst, v) }

// AppendString appends s with a uvarint length prefix.
func AppendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// AppendBytes appends b with a uvarint length prefix.
func AppendBytes(dst []byte, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// FieldReader decodes fields and remembers the first error, so decoders
// read as a straight list of fields and check once at the end. It never
// panics. The raft command format uses it too.
type FieldReader struct {
	b   []byte
	bad bool
}

// NewFieldReader reads fields from b.
func NewFieldReader(b []byte) FieldReader { return FieldReader{b: b} }

// Fail marks the input bad (a field out of range, say).
func (r *FieldReader) Fail() { r.bad = true }

// Uvarint reads an unsigned varint in its shortest form.
func (r *FieldReader) Uvarint() uint64 {
	if r.bad {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 || overlong(r.b[:n]) { // one value, one encoding
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Varint reads a zigzag varint in its shortest form.
func (r *FieldReader) Varint() int64 {
	if r.bad {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 || overlong(r.b[:n]) {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Byte reads one byte.
func (r *FieldReader) Byte() byte {
	if r.bad || len(r.b) == 0 {
		r.bad = true
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// Fixed reads exactly n raw bytes.
func (r *FieldReader) Fixed(n int) []byte {
	if r.bad || n < 0 || len(r.b) < n {
		r.bad = true
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// Bytes reads a uvarint-length-prefixed byte string.
func (r *FieldReader) Bytes() []byte {
	n := r.Uvarint()
	if r.bad || n > uint64(len(r.b)) {
		r.bad = true
		return nil
	}
	return r.Fixed(int(n))
}

// String reads what AppendString wrote.
func (r *FieldReader) String() string { return string(r.Bytes()) }

// Done reports whether every field decoded and nothing trails.
func (r *FieldReader) Done() bool { return !r.bad && len(r.b) == 0 }

// overlong reports whether a varint used more bytes than its value needs
// (a final 0x00 group). Accepting it would give one record two encodings.
func overlong(v []byte) bool { return len(v) > 1 && v[len(v)-1] == 0 }
