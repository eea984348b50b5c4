package store

import "encoding/binary"

// Record encodings are a version byte followed by fields in a fixed order:
// unsigned varints for integers and varint-length-prefixed bytes for strings.
// Decoders never panic on bad input; they return ErrCorrupt. Every record
// has exactly one encoding: overlong varints and out-of-range fields are
// rejected, so decode followed by encode gives back the input bytes.

func appendUvarint(dst []byte, v uint64) []byte { return binary.AppendUvarint(dst, v) }

func appendVarint(dst []byte, v int64) []byte { return binary.AppendVarint(dst, v) }

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBytes(dst []byte, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// reader decodes fields and remembers the first error, so decoders read as a
// straight list of fields and check once at the end.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) uvarint() uint64 {
	if r.bad {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 || overlong(r.b[:n]) {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

// overlong reports whether a varint used more bytes than its value needs
// (a final 0x00 group). Accepting it would give one record two encodings.
func overlong(v []byte) bool { return len(v) > 1 && v[len(v)-1] == 0 }

func (r *reader) varint() int64 {
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

func (r *reader) byte() byte {
	if r.bad || len(r.b) == 0 {
		r.bad = true
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.bad || n > uint64(len(r.b)) {
		r.bad = true
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) string() string { return string(r.bytes()) }

// done reports whether every field decoded and nothing trails.
func (r *reader) done() bool { return !r.bad && len(r.b) == 0 }
