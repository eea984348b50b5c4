package clickhouse

import (
	"encoding/binary"

	"github.com/waymark/waymark/ingest"
)

// appendEventFields appends ev's columns of a RowBinary row of the
// events table (eventsColumns, in order) up to the segment identity,
// which encodeRows adds. RowBinary: integers little endian, DateTime as
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

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}
