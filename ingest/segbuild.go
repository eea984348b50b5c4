package ingest

import "time"

// BuildSegment returns a sealed segment holding events in the given order,
// under the identity ref (a nonzero incarnation): the same header, records and footer the
// segment writer seals, so ReadSegment, the shipper's checks and the
// aggregator accept it as if an edge had written it. It is for benchmarks
// and tests that ship crafted events; the writer does not use it. It does
// not validate the events (like AppendEvent) and panics with a "BUG:"
// message on a node id longer than 255 bytes, which no reader would take.
func BuildSegment(ref SegmentRef, created time.Time, events []Event) []byte {
	return BuildSegmentParts(ref, created, events, nil)
}

// BuildSegmentParts is BuildSegment with drop tallies after the events.
func BuildSegmentParts(ref SegmentRef, created time.Time, events []Event, tallies []DropTally) []byte {
	if len(ref.Node) > maxNodeIDLen || ref.Inc == 0 {
		panic("BUG: segment node id longer than 255 bytes or zero incarnation")
	}
	b := appendSegmentHeader(nil, ref.Node, ref.Inc, ref.Seq, created)
	var payload []byte
	for i := range events {
		payload = AppendEvent(payload[:0], &events[i])
		b = appendRecord(b, payload)
	}
	for i := range tallies {
		payload = AppendDropTally(payload[:0], &tallies[i])
		b = appendRecord(b, payload)
	}
	return appendFooter(b, len(events)+len(tallies))
}
