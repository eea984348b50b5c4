package ingest

import "time"

// BuildSegment returns a sealed segment holding events in the given order,
// under the identity (nodeID, seq): the same header, records and footer the
// segment writer seals, so ReadSegment, the shipper's checks and the
// aggregator accept it as if an edge had written it. It is for benchmarks
// and tests that ship crafted events; the writer does not use it. It does
// not validate the events (like AppendEvent) and panics with a "BUG:"
// message on a node id longer than 255 bytes, which no reader would take.
func BuildSegment(nodeID string, seq uint64, created time.Time, events []Event) []byte {
	if len(nodeID) > maxNodeIDLen {
		panic("BUG: segment node id longer than 255 bytes")
	}
	b := appendSegmentHeader(nil, nodeID, seq, created)
	var payload []byte
	for i := range events {
		payload = AppendEvent(payload[:0], &events[i])
		b = appendRecord(b, payload)
	}
	return appendFooter(b, len(events))
}
