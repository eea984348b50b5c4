package ingest

import "fmt"

// ReadSegmentRecords is ReadSegment for a reader that keeps the records
// as they are: fn also gets each record's payload (the AppendEvent
// encoding of the event, aliasing b). Everything is verified before fn is
// first called, as in ReadSegment. Drop tallies are verified and skipped.
func ReadSegmentRecords(b []byte, fn func(payload []byte, ev *Event) error) (SegmentHeader, error) {
	return ReadSegmentParts(b, fn, nil)
}

// ReadSegmentParts is ReadSegmentRecords that also hands each drop tally
// to onTally (when not nil), in record order with the events.
func ReadSegmentParts(b []byte, onEvent func(payload []byte, ev *Event) error, onTally func(t *DropTally) error) (SegmentHeader, error) {
	h, records, err := verifySealed(b)
	if err != nil {
		return h, err
	}
	_, start, _ := parseSegmentHeader(b)
	var ev Event
	var t DropTally
	off := start
	for i := range records {
		payload, size, _ := nextRecord(b[off:])
		if err := decodeRecord(payload, &ev, &t, true); err != nil {
			return h, fmt.Errorf("cannot read segment %d of %q: %w: record %d: %w", h.Seq, h.NodeID, ErrCorruptSegment, i, err)
		}
		off += size
	}
	off = start
	for range records {
		payload, size, _ := nextRecord(b[off:])
		off += size
		if isTally(payload) {
			if onTally == nil {
				continue
			}
			if err := DecodeDropTally(payload, &t); err != nil {
				return h, fmt.Errorf("cannot read segment %d of %q: %w: %w", h.Seq, h.NodeID, ErrCorruptSegment, err)
			}
			if err := onTally(&t); err != nil {
				return h, err
			}
			continue
		}
		if err := decodeEvent(payload, &ev, false); err != nil {
			return h, fmt.Errorf("cannot read segment %d of %q: %w: %w", h.Seq, h.NodeID, ErrCorruptSegment, err)
		}
		if err := onEvent(payload, &ev); err != nil {
			return h, err
		}
	}
	return h, nil
}

// decodeRecord checks one record payload, an event or a drop tally.
func decodeRecord(payload []byte, ev *Event, t *DropTally, validateOnly bool) error {
	if isTally(payload) {
		return decodeDropTally(payload, t, validateOnly)
	}
	return decodeEvent(payload, ev, validateOnly)
}
