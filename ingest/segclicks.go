package ingest

import "fmt"

// ReadSegmentClicks calls fn with each click event of b, a sealed
// segment or segment part, in record order. The framing is checked first
// (header, every record's CRC, the footer: verifySealed); then only the
// clicks are decoded. It is for a reader that needs a segment's clicks
// only and leaves decoding the rest to another reader of the same bytes:
// a ClickHouse aggregator feeds link.clicked and click limits with it
// before its store reads the segment (node/chclicks.go), at a fraction
// of ReadSegmentRecords' cost when most events are pageviews. The Event
// is reused between calls. Damaged framing, or a click that does not
// decode, is an error wrapping ErrCorruptSegment; in the second case fn
// may have been called before.
func ReadSegmentClicks(b []byte, fn func(ev *Event) error) error {
	var ev Event
	return eachClickRecord(b, 2, func(payload []byte) error {
		if err := decodeEvent(payload, &ev, false); err != nil {
			return badClickRecord{err}
		}
		return fn(&ev)
	})
}

// badClickRecord is a click record that does not decode; eachClickRecord
// names the segment and the record and wraps it as ErrCorruptSegment.
type badClickRecord struct{ err error }

func (e badClickRecord) Error() string { return e.err.Error() }

// eachClickRecord checks b's framing (verifySealed), then calls fn with
// the payload of each click record of at least minLen bytes, in record
// order. fn answers badClickRecord for a record that does not decode.
func eachClickRecord(b []byte, minLen int, fn func(payload []byte) error) error {
	h, records, err := verifySealed(b)
	if err != nil {
		return err
	}
	_, off, _ := parseSegmentHeader(b)
	for i := range records {
		payload, size, _ := nextRecord(b[off:])
		off += size
		if isTally(payload) || len(payload) < minLen || Kind(payload[1]) != KindClick {
			continue
		}
		if err := fn(payload); err != nil {
			if bad, ok := err.(badClickRecord); ok {
				return fmt.Errorf("cannot read segment %d of %q: %w: record %d: %w", h.Seq, h.NodeID, ErrCorruptSegment, i, bad.err)
			}
			return err
		}
	}
	return nil
}

// ReadSegmentClickCodes calls fn with the link code and flags of each
// click of b, a sealed segment or segment part, in record order, without
// decoding the events of the current layouts (the code is their first
// string; peekCodeSite); older layouts are decoded. The framing is
// checked first, as in ReadSegmentClicks; the rest of each record is
// not. code aliases b.
func ReadSegmentClickCodes(b []byte, fn func(code []byte, flags uint8) error) error {
	var ev Event
	return eachClickRecord(b, 3, func(payload []byte) error {
		if v := payload[0]; v >= eventVersion3 && v <= eventVersion5 {
			if code, _, ok := peekCodeSite(payload); ok {
				return fn(code, payload[2])
			}
		}
		if err := decodeEvent(payload, &ev, false); err != nil {
			return badClickRecord{err}
		}
		return fn([]byte(ev.Code), ev.Flags)
	})
}
