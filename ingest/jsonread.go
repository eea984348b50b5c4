package ingest

import (
	"encoding/binary"
	"unicode/utf16"
	"unicode/utf8"
)

// maxJSONDepth bounds the nesting of arrays and objects in a body read by
// jsonReader; deeper is malformed. Plausible bodies nest two or three deep.
const maxJSONDepth = 64

// jsonReader reads one JSON text from a byte slice without allocating:
// strings come back as views of the input, or of scratch when they hold
// escapes or invalid UTF-8 (decoded as encoding/json decodes them, invalid
// bytes becoming U+FFFD). It accepts exactly RFC 8259 JSON, as
// encoding/json does, nested at most maxJSONDepth deep. The first syntax
// error sets failed; every method then returns zero values.
//
// Views stay valid after scratch grows (they keep the old array), but the
// caller must not reuse scratch while it holds them.
type jsonReader struct {
	b       []byte
	pos     int
	depth   int
	failed  bool
	first   bool   // just entered a container: no separator expected
	key     []byte // the member key nextMember read
	scratch *[]byte
}

// jsonKind is the kind of the value at the reader's position.
type jsonKind uint8

const (
	jsonInvalid jsonKind = iota
	jsonNull
	jsonBool
	jsonNumber
	jsonString
	jsonArray
	jsonObject
)

func (r *jsonReader) fail() {
	r.failed = true
	r.pos = len(r.b)
}

func (r *jsonReader) ws() {
	for r.pos < len(r.b) {
		switch r.b[r.pos] {
		case ' ', '\t', '\n', '\r':
			r.pos++
		default:
			return
		}
	}
}

// peek skips white space and tells what comes next.
func (r *jsonReader) peek() jsonKind {
	r.ws()
	if r.pos >= len(r.b) {
		return jsonInvalid
	}
	switch c := r.b[r.pos]; {
	case c == 'n':
		return jsonNull
	case c == 't' || c == 'f':
		return jsonBool
	case c == '"':
		return jsonString
	case c == '[':
		return jsonArray
	case c == '{':
		return jsonObject
	case c == '-' || '0' <= c && c <= '9':
		return jsonNumber
	}
	return jsonInvalid
}

// atEnd reports whether only white space is left.
func (r *jsonReader) atEnd() bool {
	r.ws()
	return !r.failed && r.pos == len(r.b)
}

// literal consumes word (null, true or false).
func (r *jsonReader) literal(word string) bool {
	if len(r.b)-r.pos < len(word) || string(r.b[r.pos:r.pos+len(word)]) != word {
		r.fail()
		return false
	}
	r.pos += len(word)
	return true
}

// boolean reads true or false.
func (r *jsonReader) boolean() bool {
	if r.pos < len(r.b) && r.b[r.pos] == 't' {
		return r.literal("true")
	}
	r.literal("false")
	return false
}

// number returns the text of a JSON number.
func (r *jsonReader) number() []byte {
	b, start := r.b, r.pos
	i := start
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		r.fail()
		return nil
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			r.fail()
			return nil
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			r.fail()
			return nil
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	r.pos = i
	return b[start:i]
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// str reads a string and returns its decoded bytes.
func (r *jsonReader) str() []byte {
	b := r.b
	if r.pos >= len(b) || b[r.pos] != '"' {
		r.fail()
		return nil
	}
	start := r.pos + 1
	i := start
	plain := true // no escapes, valid UTF-8: a view of the input
	for ; i < len(b); i++ {
		for i+8 <= len(b) && plainASCII8(binary.LittleEndian.Uint64(b[i:])) {
			i += 8 // eight bytes that need no look: most of a tracker's body
		}
		if i >= len(b) {
			break
		}
		c := b[i]
		if c == '"' {
			break
		}
		if c < 0x20 {
			r.fail()
			return nil
		}
		if c == '\\' {
			plain = false
			i++ // the escaped byte; checked while decoding
			continue
		}
		if c >= utf8.RuneSelf {
			if ru, size := utf8.DecodeRune(b[i:]); ru == utf8.RuneError && size == 1 {
				plain = false
			} else {
				i += size - 1
			}
		}
	}
	if i >= len(b) {
		r.fail()
		return nil
	}
	r.pos = i + 1
	if plain {
		return b[start:i]
	}
	return r.unquote(b[start:i])
}

// plainASCII8 reports whether the eight bytes of w (little endian) are
// all printable ASCII other than '"' and '\\': bytes a string's scan can
// skip. Each test is the exact "some byte is" form (Bit Twiddling Hacks'
// haszero and hasless), so a true answer is never wrong.
func plainASCII8(w uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	hasZero := func(v uint64) uint64 { return (v - lo) & ^v & hi }
	special := w&hi | // >= 0x80
		(w-lo*0x20)&^w&hi | // < 0x20
		hasZero(w^(lo*'"')) |
		hasZero(w^(lo*'\\'))
	return special == 0
}

// unquote decodes the inside of a string with escapes or invalid UTF-8,
// exactly as encoding/json does, into scratch.
func (r *jsonReader) unquote(s []byte) []byte {
	out := *r.scratch
	from := len(out)
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			if i+1 >= len(s) {
				r.fail()
				return nil
			}
			switch s[i+1] {
			case '"', '\\', '/':
				out = append(out, s[i+1])
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				ru, ok := hex4(s[i+2:])
				if !ok {
					r.fail()
					return nil
				}
				i += 6
				if utf16.IsSurrogate(ru) {
					// A pair only if a second \uXXXX completes it;
					// otherwise the first is U+FFFD on its own.
					if len(s)-i >= 6 && s[i] == '\\' && s[i+1] == 'u' {
						if ru2, ok := hex4(s[i+2:]); ok {
							if dec := utf16.DecodeRune(ru, ru2); dec != utf8.RuneError {
								out = utf8.AppendRune(out, dec)
								i += 6
								continue
							}
						}
					}
					ru = utf8.RuneError
				}
				out = utf8.AppendRune(out, ru)
				continue
			default:
				r.fail()
				return nil
			}
			i += 2
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			ru, size := utf8.DecodeRune(s[i:])
			if ru == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, s[i:i+size]...)
			}
			i += size
		}
	}
	*r.scratch = out
	return out[from:len(out):len(out)]
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var v rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		v = v<<4 | rune(c)
	}
	return v, true
}

// skip consumes one value of any kind, checking its syntax.
func (r *jsonReader) skip() {
	switch r.peek() {
	case jsonNull:
		r.literal("null")
	case jsonBool:
		r.boolean()
	case jsonNumber:
		r.number()
	case jsonString:
		r.skipString()
	case jsonArray:
		if !r.enter() {
			return
		}
		for r.nextElement() {
			r.skip()
		}
	case jsonObject:
		for r.enterObject(); r.nextMember(); {
			r.skip()
		}
	default:
		r.fail()
	}
}

// skipString checks a string's syntax without decoding it.
func (r *jsonReader) skipString() {
	b := r.b
	i := r.pos + 1
	for ; i < len(b); i++ {
		c := b[i]
		if c == '"' {
			r.pos = i + 1
			return
		}
		if c < 0x20 {
			break
		}
		if c == '\\' {
			if i+1 >= len(b) {
				break
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if _, ok := hex4(b[i+2:]); !ok {
					r.fail()
					return
				}
				i += 5
			default:
				r.fail()
				return
			}
		}
	}
	r.fail()
}

// enter consumes '[' or '{' and counts the depth.
func (r *jsonReader) enter() bool {
	if r.depth >= maxJSONDepth {
		r.fail()
		return false
	}
	r.depth++
	r.pos++
	r.first = true
	return true
}

// enterObject starts reading an object; call nextMember until it returns
// false, reading each member's value in between.
func (r *jsonReader) enterObject() {
	if r.peek() != jsonObject {
		r.fail()
		return
	}
	r.enter()
}

// nextElement moves to the next array element: false at ']' (consumed).
func (r *jsonReader) nextElement() bool {
	return r.next(']')
}

// nextMember moves to the next object member and consumes its key and
// colon: false at '}' (consumed). The key is in r.key.
func (r *jsonReader) nextMember() bool {
	if !r.next('}') {
		return false
	}
	if r.peek() != jsonString {
		r.fail()
		return false
	}
	r.key = r.str()
	r.ws()
	if r.pos >= len(r.b) || r.b[r.pos] != ':' {
		r.fail()
		return false
	}
	r.pos++
	return !r.failed
}

// next handles the separator before an element or member, or the closer.
func (r *jsonReader) next(closer byte) bool {
	if r.failed {
		return false
	}
	r.ws()
	if r.pos >= len(r.b) {
		r.fail()
		return false
	}
	c := r.b[r.pos]
	if c == closer {
		r.pos++
		r.depth--
		r.first = false // the container holding this one has had a value
		return false
	}
	if r.first {
		r.first = false
		return true
	}
	if c != ',' {
		r.fail()
		return false
	}
	r.pos++
	r.ws()
	if r.pos < len(r.b) && r.b[r.pos] == closer {
		r.fail() // trailing comma
		return false
	}
	return true
}
