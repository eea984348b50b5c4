package clickhouse

import (
	"context"
	"fmt"

	"github.com/waymark/waymark/ingest"
)

// SegmentRecorded reports whether raw's identity is recorded in the
// segments table already, with any bytes: StoreSegment would answer
// Duplicate or ErrConflict, never insert. The node asks it before it
// hands a segment's clicks to the link.clicked outbox, so a segment
// stored before (a retry whose first ack was lost) feeds no click twice.
func (b *Backend) SegmentRecorded(ctx context.Context, raw []byte) (bool, error) {
	if err := b.enter(); err != nil {
		return false, err
	}
	defer b.leave()
	h, err := ingest.PeekSegmentHeader(raw)
	if err != nil {
		return false, fmt.Errorf("cannot read segment: %w", err)
	}
	rec, err := b.c.segmentRecord(ctx, h.Ref())
	return rec != nil, err
}
