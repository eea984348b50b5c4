package clickhouse

import (
	"strconv"
	"time"
)

// ClickHouse 18.16 has no query parameters ({name:Type} came in 19.x), so
// values go into SQL as literals built here, never by pasting text.

// String returns s as a ClickHouse string literal: quoted, with
// backslash and quote escaped and every control byte written as \xHH,
// so no byte of s can end the literal. Bytes >= 0x80 pass through:
// ClickHouse strings are bytes.
func String(s string) string {
	b := make([]byte, 0, len(s)+2)
	b = append(b, '\'')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' || c == '\'':
			b = append(b, '\\', c)
		case c < 0x20 || c == 0x7f:
			const hex = "0123456789ABCDEF"
			b = append(b, '\\', 'x', hex[c>>4], hex[c&15])
		default:
			b = append(b, c)
		}
	}
	return string(append(b, '\''))
}

// Uint returns v as an unsigned integer literal.
func Uint(v uint64) string { return strconv.FormatUint(v, 10) }

// DateTime returns t as toDateTime(unix seconds), which does not depend
// on the server's time zone.
func DateTime(t time.Time) string { return "toDateTime(" + strconv.FormatInt(t.Unix(), 10) + ")" }
