package plausible

import (
	"strconv"
	"unicode/utf8"
)

// ValueKind says what a Value holds.
type ValueKind uint8

// Value kinds.
const (
	Null ValueKind = iota
	Int
	Float
	String
)

// Value is one dimension or metric value of a result row.
type Value struct {
	Kind  ValueKind
	Int   int64
	Float float64
	Str   string
}

// IntValue, FloatValue, StringValue and NullValue build Values.
func IntValue(v int64) Value     { return Value{Kind: Int, Int: v} }
func FloatValue(v float64) Value { return Value{Kind: Float, Float: v} }
func StringValue(v string) Value { return Value{Kind: String, Str: v} }
func NullValue() Value           { return Value{} }
func (v Value) IsNull() bool     { return v.Kind == Null }

// AppendJSON writes v as Jason would: integers bare, floats always with a
// fraction or exponent (100.0, 1.0e3), null.
func (v Value) AppendJSON(dst []byte) []byte {
	switch v.Kind {
	case Int:
		return strconv.AppendInt(dst, v.Int, 10)
	case Float:
		return appendErlangFloat(dst, v.Float)
	case String:
		return appendJSONString(dst, v.Str)
	}
	return append(dst, "null"...)
}

// Row is one result row: dimension values in query order, then metric
// values in query order.
type Row struct {
	Dimensions []Value
	Metrics    []Value
}

// Result is the answer to a query.
type Result struct {
	Rows []Row
	// TotalRows is the number of rows before pagination.
	TotalRows int
	// TimeLabels are every time bucket of the range (include.time_labels).
	TimeLabels []string
	// Estimated, when not nil, is written as meta.estimated_metrics: the
	// metrics of the answer that are estimates (Waymark's addition; its
	// rollups count unique visitors with HyperLogLog sketches).
	Estimated []string
	// DroppedEvents, when above 0, is written as meta.dropped_events: the
	// site's events in the range that the edges dropped before writing
	// them, so the numbers are short by up to that much (Waymark's
	// addition; Plausible drops nothing it has accepted).
	DroppedEvents int64

	q *Query
}

// MarshalJSON writes Plausible's response: results, meta and the executed
// query, in that order (stats/query_result.ex).
func (r *Result) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }

// AppendJSON appends the response body to dst.
func (r *Result) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"results":[`...)
	for i, row := range r.Rows {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"dimensions":[`...)
		for j, v := range row.Dimensions {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = v.AppendJSON(dst)
		}
		dst = append(dst, `],"metrics":[`...)
		for j, v := range row.Metrics {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = v.AppendJSON(dst)
		}
		dst = append(dst, "]}"...)
	}
	dst = append(dst, `],"meta":{`...)
	// Keys sorted by name, present only when asked for.
	sep := ""
	if r.DroppedEvents > 0 {
		dst = append(dst, `"dropped_events":`...)
		dst = strconv.AppendInt(dst, r.DroppedEvents, 10)
		sep = ","
	}
	if r.Estimated != nil {
		// Waymark's own key: which metrics of the answer are estimates
		// (an empty list when every number is exact).
		dst = append(dst, sep...)
		dst = append(dst, `"estimated_metrics":[`...)
		for i, m := range r.Estimated {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, m)
		}
		dst = append(dst, ']')
		sep = ","
	}
	if r.q.Include.Imports {
		dst = append(dst, sep...)
		dst = append(dst, `"imports_included":false,"imports_skip_reason":"no_imported_data"`...)
		sep = ","
	}
	if r.q.Include.TimeLabels {
		dst = append(dst, sep...)
		dst = append(dst, `"time_labels":[`...)
		for i, l := range r.TimeLabels {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, l)
		}
		dst = append(dst, ']')
		sep = ","
	}
	if r.q.Include.TotalRows {
		dst = append(dst, sep...)
		dst = append(dst, `"total_rows":`...)
		dst = strconv.AppendInt(dst, int64(r.TotalRows), 10)
	}
	dst = append(dst, `},"query":`...)
	dst = r.q.AppendEcho(dst)
	return append(dst, '}')
}

const hexDigits = "0123456789abcdef"

// appendJSONString escapes like Jason's default: quotes, backslashes and
// control characters; "/" and non-ASCII kept.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		if c < utf8.RuneSelf {
			switch c {
			case '"':
				dst = append(dst, `\"`...)
			case '\\':
				dst = append(dst, `\\`...)
			case '\n':
				dst = append(dst, `\n`...)
			case '\r':
				dst = append(dst, `\r`...)
			case '\t':
				dst = append(dst, `\t`...)
			case '\b':
				dst = append(dst, `\b`...)
			case '\f':
				dst = append(dst, `\f`...)
			default:
				dst = append(dst, `\u00`...)
				dst = append(dst, hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

// NewResult wraps rows computed elsewhere (the rollup fast path) for q, so
// they are written with the same meta and query echo as Evaluate's.
// totalRows is the row count before pagination.
func NewResult(q *Query, rows []Row, totalRows int) *Result {
	r := &Result{Rows: rows, TotalRows: totalRows, q: q}
	if q.Include.TimeLabels {
		r.TimeLabels = q.TimeLabels()
	}
	return r
}
