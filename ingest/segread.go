package ingest

import "fmt"

// ReadSegmentRecords is ReadSegment for a reader that keeps the records
// as they are: fn also gets each record's payload (the AppendEvent
// encoding of the event, aliasing b). Everything is verified before fn is
// first called, as in ReadSegment.
func ReadSegmentRecords(b []byte, fn func(payload []byte, ev *Event) error) (SegmentHeader, error) {
	h, records, err := verifySealed(b)
	if err != nil {
		return h, err
	}
	_, start, _ := parseSegmentHeader(b)
	var ev Event
	off := start
	for i := range records {
		payload, size, _ := nextRecord(b[off:])
		if err := decodeEvent(payload, &ev, true); err != nil {
			return h, fmt.Errorf("cannot read segment %d of %q: %w: record %d: %w", h.Seq, h.NodeID, ErrCorruptSegment, i, err)
		}
		off += size
	}
	off = start
	for range records {
		payload, size, _ := nextRecord(b[off:])
		if err := decodeEvent(payload, &ev, false); err != nil {
			return h, fmt.Errorf("cannot read segment %d of %q: %w: %w", h.Seq, h.NodeID, ErrCorruptSegment, err)
		}
		if err := fn(payload, &ev); err != nil {
			return h, err
		}
		off += size
	}
	return h, nil
}
