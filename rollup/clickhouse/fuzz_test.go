package clickhouse

import (
	"errors"
	"strconv"
	"testing"

	"github.com/waymark/waymark/ingest"
)

// FuzzAnswer feeds the decoders of ClickHouse's answers (JSONCompact,
// its values, error bodies) arbitrary bytes: they fail cleanly, and an
// error body's code is the number after "Code: " when there is one.
func FuzzAnswer(f *testing.F) {
	f.Add([]byte(`{"meta":[{"name":"c","type":"UInt64"}],"data":[["18446744073709551615"],[1]],"rows":2}`))
	f.Add([]byte(`{"meta":[],"data":[["2025-12-01", "a\"b", -1, 1.5, null]],"rows":1}`))
	f.Add([]byte("Code: 60, e.displayText() = DB::Exception: Table x.y doesn't exist., e.what() = DB::Exception\n"))
	f.Add([]byte("Code: 99999999999999999999, e"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var se *ServerError
		if err := serverError(500, b); !errors.As(err, &se) || se.Status != 500 {
			t.Fatalf("serverError = %v", err)
		}
		if m := codeRE.FindSubmatch(b); m != nil {
			if n, err := strconv.Atoi(string(m[1])); err == nil && n != se.Code {
				t.Fatalf("code %d from %q", se.Code, b)
			}
		}
		r, err := decodeResult(b)
		if err != nil {
			return
		}
		for _, row := range r.Data {
			for _, v := range rawRow(row) {
				v.int()
				v.uint()
				v.str()
			}
		}
	})
}

// unquoteLiteral reads a ClickHouse string literal by the escapes String
// writes (\\, \', \xHH), failing on anything else.
func unquoteLiteral(lit string) (string, bool) {
	if len(lit) < 2 || lit[0] != '\'' || lit[len(lit)-1] != '\'' {
		return "", false
	}
	var out []byte
	body := lit[1 : len(lit)-1]
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c == '\'' || c < 0x20 || c == 0x7f:
			return "", false // would end the literal or is raw control
		case c != '\\':
			out = append(out, c)
		case i+1 < len(body) && (body[i+1] == '\\' || body[i+1] == '\''):
			out = append(out, body[i+1])
			i++
		case i+3 < len(body) && body[i+1] == 'x':
			v, err := strconv.ParseUint(body[i+2:i+4], 16, 8)
			if err != nil {
				return "", false
			}
			out = append(out, byte(v))
			i += 3
		default:
			return "", false
		}
	}
	return string(out), true
}

// FuzzStringLiteral: no input makes a literal that ends early or holds a
// raw control byte, and every literal reads back as its input
// (TestStringLiteralRoundTrips checks the same against the server).
func FuzzStringLiteral(f *testing.F) {
	for _, s := range []string{"", "'", `\`, "a'b\\c\nd\x00", "') OR 1=1 --", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := unquoteLiteral(String(s))
		if !ok || got != s {
			t.Fatalf("String(%q) = %s, reads back as %q (%v)", s, String(s), got, ok)
		}
	})
}

// FuzzPeekedHeaderIsTheVerifiedOne: StoreSegment looks the identity up
// from PeekSegmentHeader before ReadSegmentRecords verifies the rest;
// whenever the whole segment verifies, the two headers are the same.
func FuzzPeekedHeaderIsTheVerifiedOne(f *testing.F) {
	f.Add(segment("e1", 3, []ingest.Event{click("k", at(0, 1, 0, 0, 0), 1, false)}))
	f.Add(ingest.BuildSegment(ingest.SegmentRef{Node: "n", Inc: 2, Seq: 5}, dec1, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		peeked, perr := ingest.PeekSegmentHeader(b)
		full, err := ingest.ReadSegmentRecords(b, func([]byte, *ingest.Event) error { return nil })
		if err != nil {
			return
		}
		if perr != nil || peeked != full {
			t.Fatalf("peeked %+v (%v); verified %+v", peeked, perr, full)
		}
	})
}

// FuzzDecodeSiteEvents: a RowBinary answer of any bytes is decoded or
// refused, never a panic, with and without attributes.
func FuzzDecodeSiteEvents(f *testing.F) {
	row := func(props int) []byte {
		var b []byte
		b = append(b, 1, 2, 3, 4, 5, 0, 2, 0)
		b = append(b, make([]byte, 16+16)...)
		b = append(b, 8, 'p', 'a', 'g', 'e', 'v', 'i', 'e', 'w', 1, '/')
		for range 14 {
			b = append(b, 2, 'D', 'E')
		}
		b = append(b, make([]byte, 8)...)
		b = append(b, 50, byte(props))
		for range props {
			b = append(b, 1, 'k')
		}
		b = append(b, byte(props))
		for range props {
			b = append(b, 1, 'v')
		}
		return append(b, make([]byte, 8)...)
	}
	f.Add(row(0))
	f.Add(append(row(2), row(1)...))
	f.Add(row(1)[:40])
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, attrs := range []bool{false, true} {
			evs, keys, err := decodeSiteEvents(b, attrs)
			if err == nil && len(evs) != len(keys) {
				t.Fatalf("%d events, %d keys", len(evs), len(keys))
			}
		}
	})
}
