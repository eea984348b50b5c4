package clickhouse

import (
	"encoding/binary"
	"net"

	"github.com/waymark/waymark/ingest"
)

// appendEventFields appends ev's columns of a RowBinary row of the
// events table (eventsColumns, in order) up to the segment identity,
// which withIdentity adds. RowBinary: integers little endian, DateTime as
// UInt32 seconds, strings and arrays as a uvarint length and their bytes.
func appendEventFields(b []byte, ev *ingest.Event) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(ev.Time/1000))
	b = binary.LittleEndian.AppendUint16(b, uint16(ev.Time%1000))
	b = append(b, byte(ev.Kind), ev.Flags)
	b = append(b, ev.ID[:]...)
	b = binary.LittleEndian.AppendUint64(b, ev.VisitorHash)
	b = binary.LittleEndian.AppendUint64(b, ev.PrevVisitorHash)
	for _, s := range [...]string{
		ev.Code, ev.SiteID, ev.Name, ev.Node, ev.Region, ev.Path, ev.ReferrerHost,
		ev.UTMSource, ev.UTMMedium, ev.UTMCampaign, ev.UTMTerm, ev.UTMContent,
		ev.Country, ev.Subdivision, ev.City, ev.Device, ev.Browser, ev.BrowserVersion,
		ev.OS, ev.OSVersion,
	} {
		b = appendString(b, s)
	}
	b = binary.LittleEndian.AppendUint64(b, ev.EngagedMS)
	b = append(b, ev.ScrollDepth)
	b = binary.AppendUvarint(b, uint64(len(ev.Props)))
	for i := range ev.Props {
		b = appendString(b, ev.Props[i].Key)
	}
	b = binary.AppendUvarint(b, uint64(len(ev.Props)))
	for i := range ev.Props {
		b = appendString(b, ev.Props[i].Value)
	}
	return b
}

// withIdentity returns the insert body: each row of rows (ending at
// ends) followed by the segment identity and its record number. The
// segment's header, and so its identity, is known only after its events
// are read; the rows are not copied.
func withIdentity(rows []byte, ends []int, ref ingest.SegmentRef) *net.Buffers {
	prefix := appendString(nil, ref.Node)
	prefix = binary.LittleEndian.AppendUint64(prefix, ref.Inc)
	prefix = binary.LittleEndian.AppendUint64(prefix, ref.Seq)
	w := len(prefix) + 4
	arena := make([]byte, 0, w*len(ends))
	bufs := make(net.Buffers, 0, 2*len(ends))
	start := 0
	for i, end := range ends {
		arena = append(arena, prefix...)
		arena = binary.LittleEndian.AppendUint32(arena, uint32(i))
		bufs = append(bufs, rows[start:end], arena[len(arena)-w:])
		start = end
	}
	return &bufs
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}
