package harness

import (
	"encoding/hex"
	"strconv"
	"time"

	"github.com/waymark/waymark/ingest"
)

// EventsTableDDL creates a MergeTree table holding every field of an
// ingest.Event, partitioned by UTC day and ordered by (site, code, time):
// a query for one site or one link over a time range reads one range of
// the primary key per day. The SQL works on ClickHouse 18.16 and on
// current releases.
func EventsTableDDL(table string) string {
	return "CREATE TABLE " + table + ` (
    time DateTime,
    ms UInt16,
    kind UInt8,
    flags UInt8,
    id UUID,
    visitor UInt64,
    prev_visitor UInt64,
    code String,
    site String,
    name String,
    node String,
    region String,
    path String,
    referrer String,
    utm_source String,
    utm_medium String,
    utm_campaign String,
    utm_term String,
    utm_content String,
    country String,
    device String,
    browser String,
    os String,
    engaged_ms UInt64,
    scroll_depth UInt8,
    prop_keys Array(String),
    prop_values Array(String)
) ENGINE = MergeTree() PARTITION BY toDate(time) ORDER BY (site, code, time)`
}

// EventsInsert is the INSERT that AppendEventTSV rows go with.
func EventsInsert(table string) string { return "INSERT INTO " + table + " FORMAT TabSeparated" }

// AppendEventTSV appends ev as one TabSeparated row of EventsTableDDL's
// columns, in order (the server's time zone must be UTC, as
// RenderClickHouseConfig sets it, for `time` to mean the same instant).
func AppendEventTSV(dst []byte, ev *ingest.Event) []byte {
	dst = time.UnixMilli(ev.Time).UTC().AppendFormat(dst, time.DateTime)
	dst = append(dst, '\t')
	dst = strconv.AppendInt(dst, ev.Time%1000, 10)
	dst = append(dst, '\t')
	dst = strconv.AppendUint(dst, uint64(ev.Kind), 10)
	dst = append(dst, '\t')
	dst = strconv.AppendUint(dst, uint64(ev.Flags), 10)
	dst = append(dst, '\t')
	dst = appendUUID(dst, ev.ID)
	dst = append(dst, '\t')
	dst = strconv.AppendUint(dst, ev.VisitorHash, 10)
	dst = append(dst, '\t')
	dst = strconv.AppendUint(dst, ev.PrevVisitorHash, 10)
	for _, s := range [...]string{
		ev.Code, ev.SiteID, ev.Name, ev.Node, ev.Region, ev.Path, ev.ReferrerHost,
		ev.UTMSource, ev.UTMMedium, ev.UTMCampaign, ev.UTMTerm, ev.UTMContent,
		ev.Country, ev.Device, ev.Browser, ev.OS,
	} {
		dst = append(dst, '\t')
		dst = appendTSVString(dst, s)
	}
	dst = append(dst, '\t')
	dst = strconv.AppendUint(dst, ev.EngagedMS, 10)
	dst = append(dst, '\t')
	dst = strconv.AppendUint(dst, uint64(ev.ScrollDepth), 10)
	dst = append(dst, "\t["...)
	for i, p := range ev.Props {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendTSVQuoted(dst, p.Key)
	}
	dst = append(dst, "]\t["...)
	for i, p := range ev.Props {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendTSVQuoted(dst, p.Value)
	}
	return append(dst, "]\n"...)
}

// appendTSVString escapes what TabSeparated gives a meaning: backslash,
// tab and newline.
func appendTSVString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			dst = append(dst, `\\`...)
		case '\t':
			dst = append(dst, `\t`...)
		case '\n':
			dst = append(dst, `\n`...)
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// appendTSVQuoted writes s as a quoted array element: 'it\'s'.
func appendTSVQuoted(dst []byte, s string) []byte {
	dst = append(dst, '\'')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\'':
			dst = append(dst, `\'`...)
		case '\\':
			dst = append(dst, `\\`...)
		case '\t':
			dst = append(dst, `\t`...)
		case '\n':
			dst = append(dst, `\n`...)
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '\'')
}

// appendUUID writes the 16 id bytes in UUID text form.
func appendUUID(dst []byte, id [16]byte) []byte {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], id[10:16])
	return append(dst, b[:]...)
}
