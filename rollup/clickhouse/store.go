package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/waymark/waymark/ingest"
)

// ErrConflict means a segment's identity is already stored with other
// bytes (a restored or cloned edge data folder); it is not stored, and
// the edge must re-identify it (ingest/DESIGN.md).
var ErrConflict = errors.New("segment identity already stored with other bytes")

// Outcome says what StoreSegment did.
type Outcome int

// Outcomes. Both mean the segment may be acknowledged.
const (
	Stored    Outcome = iota + 1 // its events were inserted now
	Duplicate                    // its identity was recorded already; nothing inserted
)

func (o Outcome) String() string {
	switch o {
	case Stored:
		return "stored"
	case Duplicate:
		return "duplicate"
	}
	return "unknown"
}

// StoreResult is what StoreSegment did with one segment.
type StoreResult struct {
	Ref     ingest.SegmentRef
	Outcome Outcome
	Events  int
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Test hooks: the body of the events insert, and extra insert settings.
var (
	testHookInsertBody func(io.Reader) io.Reader
	testInsertSettings url.Values
)

// StoreSegment stores one sealed segment's events and its identity so
// that each event is counted once however often it is called, whatever
// crashed before (DESIGN.md, "Exactly once"):
//
//  1. The segment is verified whole (ingest.ReadSegmentRecords).
//  2. Its identity is looked up: recorded with the same length and CRC
//     means Duplicate; with other bytes, ErrConflict.
//  3. Its events are inserted, each carrying (segment identity, record
//     number), which ends the events table's sorting key: a record
//     inserted again by a retry is a duplicate key, which
//     ReplacingMergeTree merges away and FINAL never counts twice.
//  4. Only then is the identity recorded.
//
// A crash or error anywhere before 4 leaves no identity, so the retry
// inserts again and the second copy of what the first got in collapses.
func (c *Client) StoreSegment(ctx context.Context, raw []byte) (StoreResult, error) {
	res, err := c.storeSegment(ctx, raw)
	switch {
	case errors.Is(err, ErrConflict):
		c.m.segConflict.Inc()
	case errors.Is(err, ingest.ErrCorruptSegment):
		c.m.segMalformed.Inc()
	case err != nil:
		c.m.segFailed.Inc()
	case res.Outcome == Stored:
		c.m.segStored.Inc()
	case res.Outcome == Duplicate:
		c.m.segDuplicate.Inc()
	}
	return res, err
}

func (c *Client) storeSegment(ctx context.Context, raw []byte) (StoreResult, error) {
	buf := encodePool.Get().(*encodeBuf)
	// The buffer goes back to the pool when the transport closes the
	// insert's body (it may read it after Do returns), or here when no
	// insert took it.
	owned := true
	defer func() {
		if owned {
			buf.release()
		}
	}()
	rows, ends, first, last, h, err := encodeSegment(raw, buf.rows[:0], buf.ends[:0])
	if err != nil {
		return StoreResult{}, err
	}
	buf.rows, buf.ends = rows, ends
	ref := h.Ref()
	n := uint32(len(ends))
	res := StoreResult{Ref: ref, Events: int(n)}
	size, crc := uint32(len(raw)), crc32.Checksum(raw, castagnoli)

	known, err := c.segmentRecord(ctx, ref)
	if err != nil {
		return res, err
	}
	if known != nil {
		if known.bytes == size && known.crc == crc {
			res.Outcome = Duplicate
			return res, nil
		}
		return res, fmt.Errorf("segment %d of %q (incarnation %d): %w", ref.Seq, ref.Node, ref.Inc, ErrConflict)
	}
	if n > 0 {
		var body io.Reader = &pooledBody{bufs: withIdentity(rows, ends, ref), buf: buf}
		owned = false
		if testHookInsertBody != nil {
			body = testHookInsertBody(body)
		}
		t0 := time.Now()
		c.m.eventsInserted.Add(int(n))
		if err := c.Insert(ctx, "INSERT INTO events FORMAT RowBinary", body, testInsertSettings); err != nil {
			return res, fmt.Errorf("cannot insert the events of segment %d of %q: %w", ref.Seq, ref.Node, err)
		}
		c.m.insertDuration.UpdateDuration(t0)
	}
	rec := fmt.Sprintf("INSERT INTO segments (node, inc, seq, bytes, crc, events, first_time, last_time, stored) VALUES (%s, %d, %d, %d, %d, %d, %s, %s, %s)",
		String(ref.Node), ref.Inc, ref.Seq, size, crc, n,
		DateTime(time.UnixMilli(first)), DateTime(time.UnixMilli(last)), DateTime(time.Now()))
	if err := c.Exec(ctx, rec); err != nil {
		return res, fmt.Errorf("cannot record segment %d of %q: %w", ref.Seq, ref.Node, err)
	}
	res.Outcome = Stored
	return res, nil
}

type segmentRecord struct{ bytes, crc uint32 }

// segmentRecord returns the stored identity of ref, or nil.
func (c *Client) segmentRecord(ctx context.Context, ref ingest.SegmentRef) (*segmentRecord, error) {
	r, err := c.Query(ctx, fmt.Sprintf("SELECT bytes, crc FROM segments WHERE node = %s AND inc = %d AND seq = %d LIMIT 1",
		String(ref.Node), ref.Inc, ref.Seq))
	if err != nil {
		return nil, fmt.Errorf("cannot look up segment %d of %q: %w", ref.Seq, ref.Node, err)
	}
	if len(r.Data) == 0 {
		return nil, nil
	}
	size, err1 := parseUint(r.Data[0][0])
	crc, err2 := parseUint(r.Data[0][1])
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("cannot read the record of segment %d of %q: %w", ref.Seq, ref.Node, err)
	}
	return &segmentRecord{uint32(size), uint32(crc)}, nil
}

// parseUint reads a JSONCompact integer, quoted (64-bit) or not.
func parseUint(v []byte) (uint64, error) {
	return strconv.ParseUint(strings.Trim(string(v), `"`), 10, 64)
}

// encodeBuf holds one StoreSegment's rows, pooled: a segment's rows are
// megabytes, and a steady stream of segments reuses them.
type encodeBuf struct {
	rows []byte
	ends []int
}

var encodePool = sync.Pool{New: func() any { return new(encodeBuf) }}

// release keeps the buffers unless a huge segment made them huge.
func (b *encodeBuf) release() {
	if cap(b.rows) > 64<<20 {
		*b = encodeBuf{}
	}
	encodePool.Put(b)
}

// pooledBody is an insert body that gives its buffer back once closed.
// The transport may call Close while a Read runs (net/http allows it),
// so both hold the lock, and a Read after Close reads nothing.
type pooledBody struct {
	mu   sync.Mutex
	bufs *net.Buffers
	buf  *encodeBuf
}

func (p *pooledBody) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.buf == nil {
		return 0, io.ErrClosedPipe
	}
	return p.bufs.Read(b)
}

func (p *pooledBody) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.buf != nil {
		p.buf.release()
		p.buf, p.bufs = nil, nil
	}
	return nil
}

// encodeSegment verifies raw and appends its events' rows (without the
// identity) to rows, their ends to ends; first and last are the oldest
// and newest event times.
func encodeSegment(raw, rows []byte, ends []int) (_ []byte, _ []int, first, last int64, _ ingest.SegmentHeader, _ error) {
	h, err := ingest.ReadSegmentRecords(raw, func(_ []byte, ev *ingest.Event) error {
		if len(ends) == 0 || ev.Time < first {
			first = ev.Time
		}
		if len(ends) == 0 || ev.Time > last {
			last = ev.Time
		}
		rows = appendEventFields(rows, ev)
		ends = append(ends, len(rows))
		return nil
	})
	if err != nil {
		return nil, nil, 0, 0, h, fmt.Errorf("cannot read segment: %w", err)
	}
	return rows, ends, first, last, h, nil
}
