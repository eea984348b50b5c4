package ingest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"
)

// ErrCorruptSegment means segment bytes failed a check: bad magic or
// version, a damaged header, a short or oversized record, a record whose
// CRC does not match, or a record that does not decode.
var ErrCorruptSegment = errors.New("corrupt segment")

// Segment file layout (all fixed-width integers big endian, except CRCs,
// which are little endian as is usual for CRC32C):
//
//	header:  magic "WMSG" | version byte (2) | sequence uint64
//	         | created Unix ms int64 | incarnation uint64
//	         | node id (uvarint length + bytes)
//	         | CRC32C of all header bytes before it (uint32)
//	records: repeated uvarint payload length | CRC32C(payload) uint32 | payload
//
//	footer:  0x00 | record count uint64 | CRC32C of those 9 bytes (uint32)
//
// A payload is one AppendEvent encoding, or a drop tally (droptally.go). The footer is written when the
// segment is sealed; an open segment has none. A zero length cannot start
// a record, so the footer is unambiguous.
//
// Version 1 headers have no incarnation field; they are still read, with
// incarnation 0. The writer writes version 2 only. Version 3 is version 2
// with a part (uint16, after the incarnation): a sub-segment the shipper
// cut from a sealed segment for one partition when it ships to several
// aggregators (split.go); it exists only on the wire, never on disk.
const (
	segmentMagic    = "WMSG"
	segmentVersion1 = 1
	segmentVersion2 = 2
	segmentVersion3 = 3
	// MaxRecordBytes bounds one record payload. Events are far smaller
	// (every field is bounded); a larger length is corruption.
	MaxRecordBytes = 1 << 20
	maxNodeIDLen   = 255
	recordOverhead = binary.MaxVarintLen32 + 4
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// SegmentHeader identifies a segment: the node that wrote it, the
// incarnation of the segment folder it was written in, its sequence
// number and, for a sub-segment, its part, which together are the
// segment's identity for idempotent shipping.
type SegmentHeader struct {
	Version     uint8
	NodeID      string
	Incarnation uint64 // 0 for version 1 headers
	Seq         uint64
	// Part is 0 for a whole segment and partition+1 for the sub-segment
	// of one partition (version 3, split.go).
	Part    uint16
	Created time.Time // when the writer opened the segment
}

// Ref is the header's identity.
func (h SegmentHeader) Ref() SegmentRef {
	return SegmentRef{Node: h.NodeID, Inc: h.Incarnation, Seq: h.Seq, Part: h.Part}
}

// appendSegmentHeader appends the encoded (version 2) header of a new
// segment.
func appendSegmentHeader(dst []byte, nodeID string, inc, seq uint64, created time.Time) []byte {
	start := len(dst)
	dst = append(dst, segmentMagic...)
	dst = append(dst, segmentVersion2)
	dst = binary.BigEndian.AppendUint64(dst, seq)
	dst = binary.BigEndian.AppendUint64(dst, uint64(created.UnixMilli()))
	dst = binary.BigEndian.AppendUint64(dst, inc)
	dst = appendString(dst, nodeID)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], crcTable))
}

// appendPartHeader appends the version 3 header of a sub-segment: the
// whole segment's identity and created time, and its part (never 0).
func appendPartHeader(dst []byte, h *SegmentHeader, part uint16) []byte {
	start := len(dst)
	dst = append(dst, segmentMagic...)
	dst = append(dst, segmentVersion3)
	dst = binary.BigEndian.AppendUint64(dst, h.Seq)
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.Created.UnixMilli()))
	dst = binary.BigEndian.AppendUint64(dst, h.Incarnation)
	dst = binary.BigEndian.AppendUint16(dst, part)
	dst = appendString(dst, h.NodeID)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], crcTable))
}

// maxHeaderLen bounds an encoded header: enough to read for parsing one.
const maxHeaderLen = len(segmentMagic) + 1 + 8 + 8 + 8 + 2 + binary.MaxVarintLen16 + maxNodeIDLen + 4

// parseSegmentHeader returns the header and its length in bytes.
func parseSegmentHeader(b []byte) (SegmentHeader, int, error) {
	var h SegmentHeader
	fixed := len(segmentMagic) + 1 + 8 + 8
	if len(b) < fixed+1 {
		return h, 0, fmt.Errorf("cannot read segment header: %w: truncated", ErrCorruptSegment)
	}
	if string(b[:4]) != segmentMagic {
		return h, 0, fmt.Errorf("cannot read segment header: %w: bad magic", ErrCorruptSegment)
	}
	switch b[4] {
	case segmentVersion1:
	case segmentVersion2, segmentVersion3:
		fixed += 8
		if b[4] == segmentVersion3 {
			fixed += 2
		}
		if len(b) < fixed+1 {
			return h, 0, fmt.Errorf("cannot read segment header: %w: truncated", ErrCorruptSegment)
		}
		// A part may be cut from a version 1 segment (incarnation 0).
		if b[4] == segmentVersion2 && binary.BigEndian.Uint64(b[21:]) == 0 {
			return h, 0, fmt.Errorf("cannot read segment header: %w: zero incarnation", ErrCorruptSegment)
		}
		if b[4] == segmentVersion3 && binary.BigEndian.Uint16(b[29:]) == 0 {
			return h, 0, fmt.Errorf("cannot read segment header: %w: zero part", ErrCorruptSegment)
		}
	default:
		return h, 0, fmt.Errorf("cannot read segment header: %w: unknown version %d", ErrCorruptSegment, b[4])
	}
	n, w := binary.Uvarint(b[fixed:])
	if w <= 0 || n > maxNodeIDLen || uint64(len(b)-fixed-w) < n+4 {
		return h, 0, fmt.Errorf("cannot read segment header: %w: bad node id", ErrCorruptSegment)
	}
	end := fixed + w + int(n)
	if crc32.Checksum(b[:end], crcTable) != binary.LittleEndian.Uint32(b[end:]) {
		return h, 0, fmt.Errorf("cannot read segment header: %w: checksum mismatch", ErrCorruptSegment)
	}
	h.Version = b[4]
	h.Seq = binary.BigEndian.Uint64(b[5:])
	h.Created = time.UnixMilli(int64(binary.BigEndian.Uint64(b[13:]))).UTC()
	if h.Version >= segmentVersion2 {
		h.Incarnation = binary.BigEndian.Uint64(b[21:])
	}
	if h.Version == segmentVersion3 {
		h.Part = binary.BigEndian.Uint16(b[29:])
	}
	h.NodeID = string(b[fixed+w : end])
	return h, end + 4, nil
}

// appendRecord frames payload as one record.
func appendRecord(dst, payload []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(payload)))
	dst = binary.LittleEndian.AppendUint32(dst, crc32.Checksum(payload, crcTable))
	return append(dst, payload...)
}

// nextRecord reads the record at the start of b. It returns the payload and
// the bytes the record took, or an error describing the damage.
func nextRecord(b []byte) (payload []byte, size int, err error) {
	n, w := binary.Uvarint(b)
	switch {
	case w == 0:
		return nil, 0, errors.New("truncated length")
	case w < 0 || n > MaxRecordBytes:
		return nil, 0, errors.New("oversized record")
	case n == 0:
		return nil, 0, errors.New("empty record")
	case uint64(len(b)-w) < 4+n:
		return nil, 0, errors.New("truncated record")
	}
	crc := binary.LittleEndian.Uint32(b[w:])
	payload = b[w+4 : w+4+int(n)]
	if crc32.Checksum(payload, crcTable) != crc {
		return nil, 0, errors.New("checksum mismatch")
	}
	return payload, w + 4 + int(n), nil
}

// appendFooter appends the seal: a zero length (never a record's, since
// records are never empty), the record count and a CRC32C of both. With
// it, a segment cut short exactly at a record boundary is still detected.
func appendFooter(dst []byte, records int) []byte {
	start := len(dst)
	dst = append(dst, 0)
	dst = binary.BigEndian.AppendUint64(dst, uint64(records))
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], crcTable))
}

const footerLen = 1 + 8 + 4

// scanSegment walks a segment's framing without decoding payloads. It
// returns the header, the end of the longest prefix of whole checksummed
// records (including the footer when sealed is true), how many records
// that prefix holds, and the first damage after it (nil when the walk
// reached the end, whether or not a footer was there). The writer's
// recovery applies the torn-tail rule with it; readers require sealed.
func scanSegment(b []byte) (h SegmentHeader, good int, records int, sealed bool, damage error) {
	h, off, err := parseSegmentHeader(b)
	if err != nil {
		return h, 0, 0, false, err
	}
	for off < len(b) {
		if b[off] == 0 {
			if len(b)-off < footerLen {
				return h, off, records, false, fmt.Errorf("%w: truncated footer at offset %d", ErrCorruptSegment, off)
			}
			f := b[off : off+footerLen]
			if crc32.Checksum(f[:9], crcTable) != binary.LittleEndian.Uint32(f[9:]) ||
				binary.BigEndian.Uint64(f[1:]) != uint64(records) {
				return h, off, records, false, fmt.Errorf("%w: bad footer at offset %d", ErrCorruptSegment, off)
			}
			if off+footerLen != len(b) {
				return h, off + footerLen, records, true, fmt.Errorf("%w: bytes after footer at offset %d", ErrCorruptSegment, off+footerLen)
			}
			return h, len(b), records, true, nil
		}
		_, size, err := nextRecord(b[off:])
		if err != nil {
			return h, off, records, false, fmt.Errorf("%w: record %d at offset %d: %v", ErrCorruptSegment, records, off, err)
		}
		off += size
		records++
	}
	return h, off, records, false, nil
}

// verifySealed checks the framing of a sealed segment: header, every
// record's CRC and the footer. It returns the header and record count.
func verifySealed(b []byte) (SegmentHeader, int, error) {
	h, _, records, sealed, damage := scanSegment(b)
	if damage != nil {
		return h, records, fmt.Errorf("cannot read segment %d of %q: %w", h.Seq, h.NodeID, damage)
	}
	if !sealed {
		return h, records, fmt.Errorf("cannot read segment %d of %q: %w: no footer (truncated)", h.Seq, h.NodeID, ErrCorruptSegment)
	}
	return h, records, nil
}

// checkSegment verifies a whole sealed segment the way ReadSegment does
// (header, framing, every CRC, every payload's decoding, the footer)
// without delivering anything or allocating per record. It returns the
// header, the offset of the first record and the record count.
func checkSegment(b []byte) (SegmentHeader, int, int, error) {
	h, records, err := verifySealed(b)
	if err != nil {
		return h, 0, records, err
	}
	_, start, _ := parseSegmentHeader(b)
	var ev Event
	var t DropTally
	off := start
	for i := range records {
		payload, size, _ := nextRecord(b[off:])
		if err := decodeRecord(payload, &ev, &t, true); err != nil {
			return h, start, records, fmt.Errorf("cannot read segment %d of %q: %w: record %d: %w", h.Seq, h.NodeID, ErrCorruptSegment, i, err)
		}
		off += size
	}
	return h, start, records, nil
}

// ReadSegment verifies a whole sealed segment and then calls fn for each
// event in order. The header, every record's framing and CRC, every
// payload's decoding and the footer (which also catches a segment cut
// short at a record boundary) are checked before fn is first called, so a
// damaged segment returns an error wrapping ErrCorruptSegment and delivers
// nothing. An error from fn stops the walk and is returned as is.
//
// fn receives the same *Event each time, overwritten per record; the
// strings in it are freshly allocated and may be kept, the Event and its
// Props slice may not.
func ReadSegment(b []byte, fn func(ev *Event) error) (SegmentHeader, error) {
	return ReadSegmentRecords(b, func(_ []byte, ev *Event) error { return fn(ev) })
}
