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
	eventVersion1 = 1 // with client time and screen width
	eventVersion2 = 2 // version 1 plus the previous-day visitor hash
	eventVersion3 = 3 // neither client time nor screen width; the previous hash optional
	eventVersion4 = 4 // version 3 plus subdivision, city and the two versions
	eventVersion5 = 5 // version 4 plus the redirect rule a click followed
)

// Encoding, version 4, the one AppendEvent writes (all varints are Go's
// encoding/binary varints):
//
//	version byte | kind byte | flags byte | id [16]byte
//	time varint | visitor hash uint64 little endian
//	previous-day hash present byte (0 or 1), then the hash (uint64 little
//	  endian, never 0) when 1
//	20 strings, each uvarint length + bytes: code, site id, name, node,
//	  region, path, referrer host, utm source, medium, campaign, term,
//	  content, country, device, browser, os, subdivision, city, browser
//	  version, os version
//	engaged ms uvarint | scroll depth byte
//	prop count uvarint, then key and value strings per prop
//
// Empty strings cost one byte, so a click is typically under 100 bytes.
//
// Version 5 is version 4 with one more byte at the end: the redirect rule
// a click followed (Event.Rule). It is written only for events with
// FlagRules, so every other event keeps its version 4 bytes and an
// aggregator that predates rules reads them; version 4 decodes with Rule
// 0 and without the flag (which version 4 cannot carry).
//
// Version 3 is version 4 without the last four strings (they decode
// empty). Versions 1 and 2 (written before) also carry the client's clock (a
// varint after the time) and the screen width (a uvarint before the
// engaged ms); version 2 has the previous-day hash right after the visitor
// hash, always. DecodeEvent reads them and discards both fields.

// stringLimits is the maximum length of each string field, in wire order
// (see eventStrings): the one table the encoder's check and the decoder
// share.
var stringLimits = [...]int{
	MaxCodeLen, MaxSiteIDLen, MaxNameLen, MaxShortLen, MaxShortLen,
	MaxPathLen, MaxHostLen,
	MaxUTMLen, MaxUTMLen, MaxUTMLen, MaxUTMLen, MaxUTMLen,
	MaxShortLen, MaxShortLen, MaxShortLen, MaxShortLen,
	MaxShortLen, MaxShortLen, MaxShortLen, MaxShortLen,
}

var stringNames = [...]string{
	"code", "site id", "name", "node", "region", "path", "referrer host",
	"utm_source", "utm_medium", "utm_campaign", "utm_term", "utm_content",
	"country", "device", "browser", "os",
	"subdivision", "city", "browser version", "os version",
}

// Strings each version has: the first n of eventStrings.
const (
	stringsV3 = 16
	stringsV4 = len(stringLimits)
)

// eventStrings lists ev's string fields in wire order.
func eventStrings(ev *Event) [len(stringLimits)]*string {
	return [...]*string{
		&ev.Code, &ev.SiteID, &ev.Name, &ev.Node, &ev.Region, &ev.Path, &ev.ReferrerHost,
		&ev.UTMSource, &ev.UTMMedium, &ev.UTMCampaign, &ev.UTMTerm, &ev.UTMContent,
		&ev.Country, &ev.Device, &ev.Browser, &ev.OS,
		&ev.Subdivision, &ev.City, &ev.BrowserVersion, &ev.OSVersion,
	}
}

// CheckEvent reports why DecodeEvent would refuse ev's encoding, or nil:
// the rules the decoder applies, on an Event. The writer checks every
// event with it before encoding, so a segment never holds a record the
// aggregator cannot decode.
func CheckEvent(ev *Event) error {
	if msg := checkScalars(ev.Kind, ev.Flags, ev.EngagedMS, ev.ScrollDepth, len(ev.Props)); msg != "" {
		return corruptEvent("%s", msg)
	}
	if msg := checkRule(ev.Kind, ev.Flags, ev.Rule); msg != "" {
		return corruptEvent("%s", msg)
	}
	for i, f := range eventStrings(ev) {
		if len(*f) > stringLimits[i] {
			return corruptEvent("%s longer than %d bytes", stringNames[i], stringLimits[i])
		}
	}
	for _, p := range ev.Props {
		if len(p.Key) > MaxPropKeyLen || len(p.Value) > MaxPropValLen {
			return corruptEvent("prop longer than the limits")
		}
	}
	return nil
}

// checkScalars holds the rules on an event's non-string fields.
func checkScalars(kind Kind, flags uint8, engagedMS uint64, scrollDepth uint8, props int) string {
	switch {
	case !kind.valid():
		return "unknown kind"
	case flags&^flagsKnown != 0:
		return "unknown flags"
	case engagedMS > maxEngagedMS:
		return "engaged ms out of range"
	case scrollDepth > maxScrollDepth:
		return "scroll depth out of range"
	case props > MaxProps:
		return "too many props"
	}
	return ""
}

// checkRule holds the rules on the redirect rule of an event.
func checkRule(kind Kind, flags, rule uint8) string {
	switch {
	case flags&FlagRules != 0 && kind != KindClick:
		return "rule flag on a site event"
	case flags&FlagRules == 0 && rule != 0:
		return "rule without the rule flag"
	case rule > store.MaxRules:
		return "rule out of range"
	}
	return ""
}

// AppendEvent appends the binary encoding of ev (version 4, or 5 for a
// click with FlagRules) to dst and returns the extended slice. It
// allocates nothing when dst has room. It does not validate; see
// CheckEvent.
func AppendEvent(dst []byte, ev *Event) []byte {
	version := byte(eventVersion4)
	if ev.Flags&FlagRules != 0 {
		version = eventVersion5
	}
	dst = append(dst, version, byte(ev.Kind), ev.Flags)
	dst = append(dst, ev.ID[:]...)
	dst = binary.AppendVarint(dst, ev.Time)
	dst = binary.LittleEndian.AppendUint64(dst, ev.VisitorHash)
	if ev.PrevVisitorHash != 0 {
		dst = append(dst, 1)
		dst = binary.LittleEndian.AppendUint64(dst, ev.PrevVisitorHash)
	} else {
		dst = append(dst, 0)
	}
	for _, s := range eventStrings(ev) {
		dst = appendString(dst, *s)
	}
	dst = binary.AppendUvarint(dst, ev.EngagedMS)
	dst = append(dst, ev.ScrollDepth)
	dst = binary.AppendUvarint(dst, uint64(len(ev.Props)))
	for i := range ev.Props {
		dst = appendString(dst, ev.Props[i].Key)
		dst = appendString(dst, ev.Props[i].Value)
	}
	if version == eventVersion5 {
		dst = append(dst, ev.Rule)
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// DecodeEvent decodes an encoding made by AppendEvent (any version) into
// ev, replacing every field. Strings share one allocation per event;
// ev.Props reuses its capacity. Malformed input returns an error wrapping
// ErrCorruptEvent and leaves ev in an unspecified state.
func DecodeEvent(b []byte, ev *Event) error { return decodeEvent(b, ev, false) }

// decodeEvent checks every field; with validateOnly it allocates nothing
// and leaves the strings empty (the segment reader's first pass).
func decodeEvent(b []byte, ev *Event, validateOnly bool) error {
	if len(b) < 3+16 {
		return corruptEvent("short header")
	}
	version := b[0]
	if version < eventVersion1 || version > eventVersion5 {
		return corruptEvent("unknown version %d", b[0])
	}
	ev.Reset()
	ev.Kind = Kind(b[1])
	ev.Flags = b[2]
	copy(ev.ID[:], b[3:19])
	d := decoder{b: b, off: 19, validateOnly: validateOnly}
	if !validateOnly {
		// One string for the whole record; fields are substrings of it.
		d.s = string(b)
	}
	ev.Time = d.varint()
	if version <= eventVersion2 {
		d.varint() // client time: no longer kept
	}
	ev.VisitorHash = d.uint64()
	hasPrev := version == eventVersion2
	if version >= eventVersion3 {
		switch d.byte() {
		case 0:
		case 1:
			hasPrev = true
		default:
			d.fail("bad previous-hash marker")
		}
	}
	if hasPrev {
		ev.PrevVisitorHash = d.uint64()
		if ev.PrevVisitorHash == 0 && d.err == "" {
			d.fail("previous visitor hash marked but 0")
		}
	}
	nStrings := stringsV4
	if version <= eventVersion3 {
		nStrings = stringsV3
	}
	fields := eventStrings(ev)
	for i, f := range fields[:nStrings] {
		*f = d.string(stringLimits[i])
	}
	if version <= eventVersion2 {
		if d.uvarint() > 1<<31 { // screen width: no longer kept
			d.fail("screen width out of range")
		}
	}
	ev.EngagedMS = d.uvarint()
	ev.ScrollDepth = d.byte()
	n := d.uvarint()
	if n > MaxProps {
		n = MaxProps + 1 // reported by checkScalars; read none
	} else {
		for range n {
			k := d.string(MaxPropKeyLen)
			v := d.string(MaxPropValLen)
			ev.Props = append(ev.Props, Prop{Key: k, Value: v})
		}
	}
	if version == eventVersion5 {
		ev.Rule = d.byte()
	}
	if d.err == "" {
		if msg := checkScalars(ev.Kind, ev.Flags, ev.EngagedMS, ev.ScrollDepth, int(n)); msg != "" {
			d.fail(msg)
		}
	}
	if d.err == "" {
		// One event, one encoding: version 5 exactly when the flag is set.
		if (version == eventVersion5) != (ev.Flags&FlagRules != 0) {
			d.fail("rule flag and version disagree")
		} else if msg := checkRule(ev.Kind, ev.Flags, ev.Rule); msg != "" {
			d.fail(msg)
		}
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
