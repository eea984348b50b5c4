package ingest

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// The shipping protocol, node to aggregator:
//
//	POST AggregatorURL + ShipPath
//	Authorization: Bearer <ShipToken>
//	Content-Type: application/x-waymark-segments
//	Content-Encoding: s2              (zstd, gzip and identity are accepted too)
//
//	body (after decompression):
//	  magic "WMSB" | version byte (2)
//	  repeated: node id (uvarint length + bytes) | incarnation uint64 big endian
//	            | sequence uint64 big endian
//	            | segment length uvarint | the segment file's bytes, unchanged
//
// Version 1 bodies (no incarnation field; incarnation 0) are still read.
// Version 3 (written only when the batch holds a sub-segment, that is
// when the node ships to several aggregators: split.go) has the part
// (uint16 big endian) after the sequence; a batch of whole segments is
// written as version 2, as before.
//
// The aggregator answers 200 with a ShipAck:
//
//	{"acked":    [{"node": "...", "inc": N, "seq": N}, ...],
//	 "rejected": [{"node": "...", "inc": N, "seq": N, "reason": "malformed" | "conflict"}, ...]}
//
// "acked" names every segment it has stored durably (including ones it
// already had with the same content: that is what makes a retry safe); the
// node deletes exactly those. "rejected" names segments it will never
// store under that identity: RejectMalformed (the segment does not decode;
// the node sets it aside as .bad) and RejectConflict (it already holds
// different content under that identity, as after a VM snapshot restore;
// the node gives the segment a new incarnation and sends it again). A
// segment in neither list is sent again later. Anything else than 200
// means "nothing acknowledged" and the node backs off.
const (
	ShipPath        = "/internal/v1/segments"
	ShipContentType = "application/x-waymark-segments"
	batchMagic      = "WMSB"
	batchVersion1   = 1
	batchVersion2   = 2
	batchVersion3   = 3
)

// Reasons in ShipAck.Rejected.
const (
	RejectMalformed = "malformed" // the segment fails ReadSegment or its header does not match its frame
	RejectConflict  = "conflict"  // another segment with different content was stored under this identity
)

// SegmentRef is a segment's identity: the node that wrote it, the
// incarnation of the segment folder it was written in (0 for segments
// written before incarnations existed), its sequence number there and
// its part: 0 for a whole segment, partition+1 for a sub-segment
// (split.go; absent from the JSON when 0, so acks of whole segments are
// as before).
type SegmentRef struct {
	Node string `json:"node"`
	Inc  uint64 `json:"inc"`
	Seq  uint64 `json:"seq"`
	Part uint16 `json:"part,omitempty"`
}

// SegmentRejection is a segment the aggregator refuses for good, and why.
type SegmentRejection struct {
	SegmentRef
	Reason string `json:"reason"`
}

// ShipAck is the aggregator's JSON answer to a batch.
type ShipAck struct {
	Acked    []SegmentRef       `json:"acked"`
	Rejected []SegmentRejection `json:"rejected,omitempty"`
}

// BatchSegment is one segment in a batch.
type BatchSegment struct {
	Ref  SegmentRef
	Data []byte // the whole segment file
}

// AppendBatch appends the uncompressed encoding of a batch to dst.
func AppendBatch(dst []byte, segs []BatchSegment) []byte {
	version := byte(batchVersion2)
	for _, s := range segs {
		if s.Ref.Part != 0 {
			version = batchVersion3
			break
		}
	}
	dst = append(dst, batchMagic...)
	dst = append(dst, version)
	for _, s := range segs {
		dst = appendString(dst, s.Ref.Node)
		dst = binary.BigEndian.AppendUint64(dst, s.Ref.Inc)
		dst = binary.BigEndian.AppendUint64(dst, s.Ref.Seq)
		if version == batchVersion3 {
			dst = binary.BigEndian.AppendUint16(dst, s.Ref.Part)
		}
		dst = binary.AppendUvarint(dst, uint64(len(s.Data)))
		dst = append(dst, s.Data...)
	}
	return dst
}

// ReadBatch decodes a batch body sent with the given Content-Encoding
// ("s2", the framed stream format of github.com/klauspost/compress/s2,
// with a CRC32C per block; "zstd",
// "gzip" or empty), refusing more than maxBytes once decompressed.
// It parses the whole framing before calling fn once per segment, so a
// malformed batch (error wrapping ErrCorruptSegment) delivers nothing. Each
// segment's own contents are checked by ReadSegment, which the aggregator
// calls from fn; it should also check that the segment's header matches
// the ref. An error from fn stops the walk and is returned as is.
func ReadBatch(body []byte, contentEncoding string, maxBytes int64, fn func(seg BatchSegment) error) error {
	raw, err := decompress(body, contentEncoding, maxBytes)
	if err != nil {
		return err
	}
	segs, err := parseBatch(raw)
	if err != nil {
		return err
	}
	for _, s := range segs {
		if err := fn(s); err != nil {
			return err
		}
	}
	return nil
}

// DefaultMaxBatchBytes is the most a batch may decompress to: room for the
// shipper's default batch (4 MiB) or one segment far past the default
// 8 MiB rotation size, and little more, so a small compressed body cannot
// make the aggregator allocate much past what a real batch needs.
const DefaultMaxBatchBytes = 32 << 20

// maxZstdWindow bounds the zstd window a batch may use (the encoder's
// default is 8 MiB at every level up to "better").
const maxZstdWindow = 8 << 20

func decompress(body []byte, encoding string, maxBytes int64) ([]byte, error) {
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "", "identity":
		if int64(len(body)) > maxBytes {
			return nil, fmt.Errorf("cannot read batch: %w: larger than %d bytes", ErrCorruptSegment, maxBytes)
		}
		return body, nil
	case "s2":
		// The framed stream format: every block carries a CRC32C, checked
		// while reading.
		raw, err := io.ReadAll(io.LimitReader(s2.NewReader(bytes.NewReader(body)), maxBytes+1))
		if err != nil {
			return nil, fmt.Errorf("cannot read batch: %w: %v", ErrCorruptSegment, err)
		}
		if int64(len(raw)) > maxBytes {
			return nil, fmt.Errorf("cannot read batch: %w: larger than %d bytes", ErrCorruptSegment, maxBytes)
		}
		return raw, nil
	case "zstd":
		// Streamed through a limit, never DecodeAll: a few KB of frames
		// can declare gigabytes, and DecodeAll sizes its output from them.
		// The window bound keeps the decoder's own buffers small too.
		dec, err := zstd.NewReader(bytes.NewReader(body), zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(uint64(maxBytes)), zstd.WithDecoderMaxWindow(uint64(min(maxBytes, maxZstdWindow))))
		if err != nil {
			return nil, fmt.Errorf("cannot read batch: %w: %v", ErrCorruptSegment, err)
		}
		defer dec.Close()
		raw, err := io.ReadAll(io.LimitReader(dec, maxBytes+1))
		if err != nil {
			return nil, fmt.Errorf("cannot read batch: %w: %v", ErrCorruptSegment, err)
		}
		if int64(len(raw)) > maxBytes {
			return nil, fmt.Errorf("cannot read batch: %w: larger than %d bytes", ErrCorruptSegment, maxBytes)
		}
		return raw, nil
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("cannot read batch: %w: %v", ErrCorruptSegment, err)
		}
		raw, err := io.ReadAll(io.LimitReader(zr, maxBytes+1))
		if err != nil {
			return nil, fmt.Errorf("cannot read batch: %w: %v", ErrCorruptSegment, err)
		}
		if int64(len(raw)) > maxBytes {
			return nil, fmt.Errorf("cannot read batch: %w: larger than %d bytes", ErrCorruptSegment, maxBytes)
		}
		return raw, nil
	}
	return nil, fmt.Errorf("cannot read batch: unsupported Content-Encoding %q", encoding)
}

func parseBatch(b []byte) ([]BatchSegment, error) {
	if len(b) < len(batchMagic)+1 || string(b[:4]) != batchMagic {
		return nil, fmt.Errorf("cannot read batch: %w: bad magic", ErrCorruptSegment)
	}
	version := b[4]
	if version != batchVersion1 && version != batchVersion2 && version != batchVersion3 {
		return nil, fmt.Errorf("cannot read batch: %w: unknown version %d", ErrCorruptSegment, b[4])
	}
	d := decoder{b: b, off: 5, validateOnly: true}
	var segs []BatchSegment
	for d.off < len(b) && d.err == "" {
		nodeLen := d.uvarint()
		if nodeLen > maxNodeIDLen || uint64(len(b)-d.off) < nodeLen {
			d.fail("bad node id")
			break
		}
		node := string(b[d.off : d.off+int(nodeLen)])
		d.off += int(nodeLen)
		var inc uint64
		if version >= batchVersion2 {
			inc = d.beUint64()
		}
		seq := d.beUint64()
		var part uint16
		if version == batchVersion3 {
			part = d.beUint16()
		}
		n := d.uvarint()
		if d.err != "" || uint64(len(b)-d.off) < n {
			d.fail("truncated segment")
			break
		}
		segs = append(segs, BatchSegment{Ref: SegmentRef{Node: node, Inc: inc, Seq: seq, Part: part}, Data: b[d.off : d.off+int(n)]})
		d.off += int(n)
	}
	if d.err != "" {
		return nil, fmt.Errorf("cannot read batch: %w: %s", ErrCorruptSegment, d.err)
	}
	return segs, nil
}

func (d *decoder) beUint16() uint16 {
	if len(d.b)-d.off < 2 {
		d.fail("truncated")
		return 0
	}
	v := binary.BigEndian.Uint16(d.b[d.off:])
	d.off += 2
	return v
}

func (d *decoder) beUint64() uint64 {
	if len(d.b)-d.off < 8 {
		d.fail("truncated")
		return 0
	}
	v := binary.BigEndian.Uint64(d.b[d.off:])
	d.off += 8
	return v
}
