package ingest

import (
	"encoding/binary"
	"fmt"

	"github.com/waymark/waymark/store"
)

// ErrCorruptEvent means bytes could not be decoded as an Event. It is the
// store package's corrupt-record sentinel, so errors.Is works across layers.
var ErrCorruptEvent = store.ErrCorrupt

// The first byte of every encoded event is its version. A new layout gets
// a new version; DecodeEvent keeps reading the old ones (segments and the
// aggregator's raw events outlive any one binary).
const (
	eventVersion1 = 1 // no previous-day visitor hash
	eventVersion2 = 2 // version 1 plus the previous-day visitor hash
)

// Encoding, version 1 (all varints are Go's encoding/binary varints):
//
//	version byte | kind byte | flags byte | id [16]byte
//	time varint | client time varint | visitor hash uint64 little endian
//	16 strings, each uvarint length + bytes: code, site id, name, node,
//	  region, path, referrer host, utm source, medium, campaign, term,
//	  content, country, device, browser, os
//	screen width uvarint | engaged ms uvarint | scroll depth byte
//	prop count uvarint, then key and value strings per prop
//
// Empty strings cost one byte, so a click is typically under 100 bytes.
//
// Version 2 is version 1 with the previous-day visitor hash (uint64 little
// endian, never 0) right after the visitor hash. AppendEvent writes it only
// for events that carry that hash (site events in the first 30 minutes of
// a UTC day), so every other event stays version 1, as small as before and
// readable by older binaries.

// stringLimits is the maximum length of each string field, in wire order.
var stringLimits = [...]int{
	MaxCodeLen, MaxSiteIDLen, MaxNameLen, MaxShortLen, MaxShortLen,
	MaxPathLen, MaxHostLen,
	MaxUTMLen, MaxUTMLen, MaxUTMLen, MaxUTMLen, MaxUTMLen,
	MaxShortLen, MaxShortLen, MaxShortLen, MaxShortLen,
}

// AppendEvent appends the binary encoding of ev to dst and returns the
// extended slice. It allocates nothing when dst has room. It does not
// validate; the writer only encodes events built by this package.
func AppendEvent(dst []byte, ev *Event) []byte {
	version := byte(eventVersion1)
	if ev.PrevVisitorHash != 0 {
		version = eventVersion2
	}
	dst = append(dst, version, byte(ev.Kind), ev.Flags)
	dst = append(dst, ev.ID[:]...)
	dst = binary.AppendVarint(dst, ev.Time)
	dst = binary.AppendVarint(dst, ev.ClientTime)
	dst = binary.LittleEndian.AppendUint64(dst, ev.VisitorHash)
	if version == eventVersion2 {
		dst = binary.LittleEndian.AppendUint64(dst, ev.PrevVisitorHash)
	}
	for _, s := range [...]string{
		ev.Code, ev.SiteID, ev.Name, ev.Node, ev.Region, ev.Path, ev.ReferrerHost,
		ev.UTMSource, ev.UTMMedium, ev.UTMCampaign, ev.UTMTerm, ev.UTMContent,
		ev.Country, ev.Device, ev.Browser, ev.OS,
	} {
		dst = appendString(dst, s)
	}
	dst = binary.AppendUvarint(dst, uint64(ev.ScreenWidth))
	dst = binary.AppendUvarint(dst, ev.EngagedMS)
	dst = append(dst, ev.ScrollDepth)
	dst = binary.AppendUvarint(dst, uint64(len(ev.Props)))
	for i := range ev.Props {
		dst = appendString(dst, ev.Props[i].Key)
		dst = appendString(dst, ev.Props[i].Value)
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// DecodeEvent decodes an encoding made by AppendEvent into ev, replacing
// every field. Strings share one allocation per event; ev.Props reuses its
// capacity. Malformed input returns an error wrapping ErrCorruptEvent and
// leaves ev in an unspecified state.
func DecodeEvent(b []byte, ev *Event) error { return decodeEvent(b, ev, false) }

// decodeEvent checks every field; with validateOnly it allocates nothing
// and leaves the strings empty (the segment reader's first pass).
func decodeEvent(b []byte, ev *Event, validateOnly bool) error {
	if len(b) < 3+16 {
		return corruptEvent("short header")
	}
	version := b[0]
	if version != eventVersion1 && version != eventVersion2 {
		return corruptEvent("unknown version %d", b[0])
	}
	ev.Reset()
	ev.Kind = Kind(b[1])
	ev.Flags = b[2]
	if !ev.Kind.valid() {
		return corruptEvent("unknown kind %d", b[1])
	}
	if ev.Flags&^flagsKnown != 0 {
		return corruptEvent("unknown flags %#x", b[2])
	}
	copy(ev.ID[:], b[3:19])
	d := decoder{b: b, off: 19, validateOnly: validateOnly}
	if !validateOnly {
		// One string for the whole record; fields are substrings of it.
		d.s = string(b)
	}
	ev.Time = d.varint()
	ev.ClientTime = d.varint()
	ev.VisitorHash = d.uint64()
	if version == eventVersion2 {
		ev.PrevVisitorHash = d.uint64()
		if ev.PrevVisitorHash == 0 && d.err == "" {
			d.fail("version 2 without a previous visitor hash")
		}
	}
	fields := [...]*string{
		&ev.Code, &ev.SiteID, &ev.Name, &ev.Node, &ev.Region, &ev.Path, &ev.ReferrerHost,
		&ev.UTMSource, &ev.UTMMedium, &ev.UTMCampaign, &ev.UTMTerm, &ev.UTMContent,
		&ev.Country, &ev.Device, &ev.Browser, &ev.OS,
	}
	for i, f := range fields {
		*f = d.string(stringLimits[i])
	}
	width := d.uvarint()
	if width > 1<<31 {
		d.fail("screen width out of range")
	}
	ev.ScreenWidth = uint32(width)
	ev.EngagedMS = d.uvarint()
	if ev.EngagedMS > maxEngagedMS {
		d.fail("engaged ms out of range")
	}
	ev.ScrollDepth = d.byte()
	if ev.ScrollDepth > maxScrollDepth {
		d.fail("scroll depth out of range")
	}
	n := d.uvarint()
	if n > MaxProps {
		d.fail("too many props")
		n = 0
	}
	for range n {
		k := d.string(MaxPropKeyLen)
		v := d.string(MaxPropValLen)
		ev.Props = append(ev.Props, Prop{Key: k, Value: v})
	}
	if d.err == "" && d.off != len(b) {
		d.fail("trailing bytes")
	}
	if d.err != "" {
		return corruptEvent("%s", d.err)
	}
	return nil
}

func corruptEvent(format string, args ...any) error {
	return fmt.Errorf("cannot decode event: %w: %s", ErrCorruptEvent, fmt.Sprintf(format, args...))
}

// decoder reads fields and remembers the first failure, so the decode
// function reads straight through.
type decoder struct {
	b   []byte
	s   string // same bytes as b, for substrings
	off int
	err string
	// validateOnly skips making strings.
	validateOnly bool
}

func (d *decoder) fail(msg string) {
	if d.err == "" {
		d.err = msg
	}
	d.off = len(d.b)
}

func (d *decoder) byte() byte {
	if d.off >= len(d.b) {
		d.fail("truncated")
		return 0
	}
	c := d.b[d.off]
	d.off++
	return c
}

func (d *decoder) uint64() uint64 {
	if len(d.b)-d.off < 8 {
		d.fail("truncated")
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b[d.off:])
	d.off += 8
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b[d.off:])
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) string(limit int) string {
	n := d.uvarint()
	if n > uint64(limit) {
		d.fail("string too long")
		return ""
	}
	if uint64(len(d.b)-d.off) < n {
		d.fail("truncated string")
		return ""
	}
	start := d.off
	d.off += int(n)
	if d.validateOnly {
		return ""
	}
	return d.s[start:d.off]
}
