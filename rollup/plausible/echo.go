package plausible

import (
	"strconv"
	"time"
)

// AppendEcho writes the executed query as Plausible echoes it under
// "query" (QueryResult.from): site_id, metrics, date_range in the site
// timezone, filters as parsed plus the added hostname filters, dimensions
// with time resolved, order_by with defaults, include with its true keys
// only, pagination.
func (q *Query) AppendEcho(dst []byte) []byte {
	dst = append(dst, `{"site_id":`...)
	dst = appendJSONString(dst, q.SiteID)
	dst = append(dst, `,"metrics":`...)
	dst = appendStrings(dst, q.Metrics)
	dst = append(dst, `,"date_range":[`...)
	dst = appendJSONString(dst, q.isoInZone(q.From))
	dst = append(dst, ',')
	dst = appendJSONString(dst, q.isoInZone(q.Last()))
	dst = append(dst, `],"filters":[`...)
	for i := range q.Filters {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendFilter(dst, &q.Filters[i])
	}
	dst = append(dst, `],"dimensions":`...)
	dst = appendStrings(dst, q.Dimensions)
	dst = append(dst, `,"order_by":[`...)
	for i, o := range q.OrderBy {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		dst = appendJSONString(dst, o.Key)
		if o.Desc {
			dst = append(dst, `,"desc"]`...)
		} else {
			dst = append(dst, `,"asc"]`...)
		}
	}
	dst = append(dst, `],"include":{`...)
	sep := ""
	for _, kv := range []struct {
		key string
		on  bool
	}{
		{"imports", q.Include.Imports}, {"time_labels", q.Include.TimeLabels},
		{"total_rows", q.Include.TotalRows}, {"trim_relative_date_range", q.Include.TrimRelativeDateRange},
	} {
		if kv.on {
			dst = append(dst, sep...)
			dst = append(dst, '"')
			dst = append(dst, kv.key...)
			dst = append(dst, `":true`...)
			sep = ","
		}
	}
	dst = append(dst, `},"pagination":{"limit":`...)
	dst = strconv.AppendInt(dst, int64(q.Pagination.Limit), 10)
	dst = append(dst, `,"offset":`...)
	dst = strconv.AppendInt(dst, int64(q.Pagination.Offset), 10)
	return append(dst, "}}"...)
}

func appendStrings(dst []byte, list []string) []byte {
	dst = append(dst, '[')
	for i, s := range list {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, s)
	}
	return append(dst, ']')
}

func appendFilter(dst []byte, f *Filter) []byte {
	dst = append(dst, '[')
	dst = appendJSONString(dst, f.Op)
	switch {
	case f.IsLeaf():
		dst = append(dst, ',')
		dst = appendJSONString(dst, f.Dimension)
		dst = append(dst, ",["...)
		for i, v := range f.Values {
			if i > 0 {
				dst = append(dst, ',')
			}
			if f.intClauses != nil && f.intClauses[i] {
				dst = append(dst, v...)
			} else {
				dst = appendJSONString(dst, v)
			}
		}
		dst = append(dst, ']')
		switch f.modifier {
		case modEmpty:
			dst = append(dst, ",{}"...)
		case modSet:
			dst = append(dst, `,{"case_sensitive":`...)
			dst = strconv.AppendBool(dst, f.CaseSensitive)
			dst = append(dst, '}')
		}
	case f.Op == OpAnd || f.Op == OpOr:
		dst = append(dst, ",["...)
		for i := range f.Children {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendFilter(dst, &f.Children[i])
		}
		dst = append(dst, ']')
	default:
		dst = append(dst, ',')
		dst = appendFilter(dst, &f.Children[0])
	}
	return append(dst, ']')
}

// isoInZone is DateTime.to_iso8601 after shifting to the site timezone:
// "Z" only for Etc/UTC.
func (q *Query) isoInZone(t time.Time) string {
	lt := t.In(q.Timezone)
	_, off := lt.Zone()
	b := make([]byte, 0, 25)
	b = lt.AppendFormat(b, "2006-01-02T15:04:05")
	if off == 0 && q.tz == "Etc/UTC" {
		return string(append(b, 'Z'))
	}
	sign := byte('+')
	if off < 0 {
		sign, off = '-', -off
	}
	b = append(b, sign)
	b = appendPadded(b, off/3600, 2)
	b = append(b, ':')
	b = appendPadded(b, off%3600/60, 2)
	if s := off % 60; s != 0 {
		b = append(b, ':')
		b = appendPadded(b, s, 2)
	}
	return string(b)
}
