package ingest

// PeekSegmentHeader reads and checks (CRC included) only the header of
// segment bytes, so that a reader can know the segment's identity before
// it walks the records with ReadSegmentRecords, which verifies the rest.
func PeekSegmentHeader(b []byte) (SegmentHeader, error) {
	h, _, err := parseSegmentHeader(b)
	return h, err
}
