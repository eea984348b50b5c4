package plausible

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The request body is decoded into generic values the way Jason does:
// objects to map[string]any, arrays to []any, strings, bools, nil, and
// numbers to jsonInt (no fraction or exponent) or float64.

// jsonInt is a JSON integer literal. Big ones keep their text; v saturates.
type jsonInt struct {
	text string
	v    int64
}

func decodeJSON(body []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return convertNumbers(v), nil
}

func convertNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = convertNumbers(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = convertNumbers(e)
		}
		return x
	case json.Number:
		s := string(x)
		if strings.ContainsAny(s, ".eE") {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil { // out of range: Jason refuses too
				return math.Inf(1)
			}
			return f
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			if strings.HasPrefix(s, "-") {
				n = math.MinInt64
			} else {
				n = math.MaxInt64
			}
		}
		if n == 0 {
			s = "0" // "-0" is the integer 0
		}
		return jsonInt{text: s, v: n}
	}
	return v
}

// inspect renders v as Elixir's inspect(v, charlists: :as_lists) does,
// which Plausible puts into its error messages.
func inspect(v any) string {
	var b strings.Builder
	writeInspect(&b, v)
	return b.String()
}

// inspectLimit is Inspect.Opts' default :limit of items per collection.
const inspectLimit = 50

func writeInspect(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("nil")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case string:
		writeInspectString(b, x)
	case jsonInt:
		b.WriteString(x.text)
	case float64:
		b.Write(appendErlangFloat(nil, x))
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			if i == inspectLimit {
				b.WriteString("...")
				break
			}
			writeInspect(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys) // small Erlang maps iterate in key order
		b.WriteString("%{")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			if i == inspectLimit {
				b.WriteString("...")
				break
			}
			writeInspectString(b, k)
			b.WriteString(" => ")
			writeInspect(b, x[k])
		}
		b.WriteByte('}')
	default:
		b.WriteString("nil")
	}
}

func writeInspectString(b *strings.Builder, s string) {
	if !elixirPrintable(s) {
		b.WriteString("<<")
		for i := 0; i < len(s); i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.Itoa(int(s[i])))
		}
		b.WriteString(">>")
		return
	}
	b.WriteByte('"')
	for i, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\v':
			b.WriteString(`\v`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\a':
			b.WriteString(`\a`)
		case 0x1b:
			b.WriteString(`\e`)
		case 0x7f:
			b.WriteString(`\d`)
		case '#':
			if strings.HasPrefix(s[i:], "#{") {
				b.WriteString(`\#`)
			} else {
				b.WriteByte('#')
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// elixirPrintable follows String.printable?/1: valid UTF-8 of printable
// characters and the escapable control characters.
func elixirPrintable(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			return false
		}
		i += size
		switch {
		case r >= 0x20 && r <= 0x7e:
		case r == '\n', r == '\r', r == '\t', r == '\v', r == '\b', r == '\f', r == '\a', r == 0x1b, r == 0x7f:
		case r >= 0xa0 && r <= 0xd7ff, r >= 0xe000 && r <= 0xfffd, r >= 0x10000 && r <= 0x10ffff:
		default:
			return false
		}
	}
	return true
}

// appendErlangFloat writes f the way Erlang's io_lib_format:fwrite_g/1
// does (Jason's float encoding, Elixir's inspect): the shortest digits that
// read back, in plain form unless the exponent form is shorter.
func appendErlangFloat(dst []byte, f float64) []byte {
	if f == 0 {
		if math.Signbit(f) {
			return append(dst, "-0.0"...)
		}
		return append(dst, "0.0"...)
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return append(dst, "null"...) // unreachable for metric values
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	// Shortest digits: d1.d2d3...e±X, so value = digits * 10^place.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	digits = strings.TrimRight(digits, "0")
	if digits == "" {
		digits = "0"
	}
	l := len(digits)
	place := x - l + 1
	expL := strconv.Itoa(place + l - 1)
	expCost := len(expL) + 2
	if place < 0 {
		switch {
		case place+l-1 >= 0:
			dst = append(dst, digits[:l+place]...)
			dst = append(dst, '.')
			return append(dst, digits[l+place:]...)
		case 2-place-l <= expCost:
			dst = append(dst, "0."...)
			for i := 0; i < -place-l; i++ {
				dst = append(dst, '0')
			}
			return append(dst, digits...)
		}
		return insertExp(dst, expL, digits)
	}
	dot := 0
	if l == 1 {
		dot = 1
	}
	if expCost+dot >= place+2 && f < float64(1<<53) {
		dst = append(dst, digits...)
		for i := 0; i < place; i++ {
			dst = append(dst, '0')
		}
		return append(dst, ".0"...)
	}
	return insertExp(dst, expL, digits)
}

func insertExp(dst []byte, expL, digits string) []byte {
	dst = append(dst, digits[0])
	if len(digits) == 1 {
		dst = append(dst, ".0"...)
	} else {
		dst = append(dst, '.')
		dst = append(dst, digits[1:]...)
	}
	dst = append(dst, 'e')
	return append(dst, expL...)
}
