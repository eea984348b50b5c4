package clickhouse

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
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
//  1. Its header is read (ingest.PeekSegmentHeader) and its identity
//     looked up: recorded with the same length and CRC means Duplicate
//     (those bytes verified when they were stored); with other bytes,
//     ErrConflict, or ingest.ErrCorruptSegment if they do not verify.
//  2. Its events are inserted, encoded as the insert streams, each
//     carrying (segment identity, record number), which ends the events
//     table's sorting key: a record inserted again by a retry is a
//     duplicate key, which ReplacingMergeTree merges away and FINAL
//     never counts twice. ingest.ReadSegmentRecords verifies the whole
//     segment before the first event, so a damaged one sends no row.
//  3. Only then is the identity recorded.
//
// A crash or error anywhere before 3 leaves no identity, so the retry
// inserts again and the second copy of what the first got in collapses.
func (c *Client) StoreSegment(ctx context.Context, raw []byte) (StoreResult, error) {
	return c.storeSegmentMarking(ctx, raw, nil)
}

// lateMarker is told, after a segment's events and tallies are in and
// before its identity is recorded, the span of each site's events older
// than before (ms): a crash between leaves no identity, so the retry
// marks again.
type lateMarker struct {
	before int64
	mark   func(ctx context.Context, sites map[string]lateSpan, clicks *lateSpan) error
}

func (c *Client) storeSegmentMarking(ctx context.Context, raw []byte, late *lateMarker) (StoreResult, error) {
	res, err := c.storeSegment(ctx, raw, late)
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

func (c *Client) storeSegment(ctx context.Context, raw []byte, late *lateMarker) (StoreResult, error) {
	h, err := ingest.PeekSegmentHeader(raw)
	if err != nil {
		return StoreResult{}, fmt.Errorf("cannot read segment: %w", err)
	}
	ref := h.Ref()
	res := StoreResult{Ref: ref}
	size, crc := uint32(len(raw)), crc32.Checksum(raw, castagnoli)
	known, err := c.segmentRecord(ctx, ref)
	if err != nil {
		return res, err
	}
	if known != nil {
		if known.bytes == size && known.crc == crc {
			// The very bytes that verified when they were stored.
			res.Outcome = Duplicate
			return res, nil
		}
		if _, err := ingest.ReadSegmentRecords(raw, func([]byte, *ingest.Event) error { return nil }); err != nil {
			return res, fmt.Errorf("cannot read segment: %w", err)
		}
		return res, fmt.Errorf("segment %d of %q (incarnation %d): %w", ref.Seq, ref.Node, ref.Inc, ErrConflict)
	}

	// The rows are encoded while the insert streams them: ClickHouse
	// parses one chunk while the next is encoded. ReadSegmentRecords
	// verifies the whole segment before its first event, so a damaged
	// one sends no row, and its insert ends with the error, empty.
	pr, pw := io.Pipe()
	enc := make(chan encoded, 1)
	go func() {
		var before int64
		if late != nil {
			before = late.before
		}
		e := encodeRows(raw, ref, pw, before)
		pw.CloseWithError(e.err)
		enc <- e
	}()
	var body io.Reader = pr
	if testHookInsertBody != nil {
		body = testHookInsertBody(body)
	}
	t0 := time.Now()
	err = c.Insert(ctx, "INSERT INTO events FORMAT RowBinary", body, testInsertSettings)
	pr.CloseWithError(errInsertEnded) // unblocks the encoder when the insert ended early
	e := <-enc
	c.m.eventsInserted.Add(int(e.rows))
	res.Events = int(e.rows)
	switch {
	case e.err != nil && !errors.Is(e.err, errInsertEnded):
		return res, fmt.Errorf("cannot read segment: %w", e.err)
	case err != nil:
		return res, fmt.Errorf("cannot insert the events of segment %d of %q: %w", ref.Seq, ref.Node, err)
	case e.err != nil:
		return res, fmt.Errorf("BUG: the insert of segment %d of %q succeeded without all its rows: %w", ref.Seq, ref.Node, e.err)
	}
	c.m.insertDuration.UpdateDuration(t0)
	if err := c.insertTallies(ctx, ref, e.tallies); err != nil {
		return res, err
	}
	if late != nil && (len(e.late) > 0 || e.lateClicks != nil) {
		if err := late.mark(ctx, e.late, e.lateClicks); err != nil {
			return res, err
		}
	}
	rec := fmt.Sprintf("INSERT INTO segments (node, inc, seq, part, bytes, crc, events, first_time, last_time, stored) VALUES (%s, %d, %d, %d, %d, %d, %d, %s, %s, %s)",
		String(ref.Node), ref.Inc, ref.Seq, ref.Part, size, crc, e.rows,
		DateTime(time.UnixMilli(e.first)), DateTime(time.UnixMilli(e.last)), DateTime(time.Now()))
	if err := c.Exec(ctx, rec); err != nil {
		return res, fmt.Errorf("cannot record segment %d of %q: %w", ref.Seq, ref.Node, err)
	}
	res.Outcome = Stored
	return res, nil
}

var errInsertEnded = errors.New("insert ended")

// encoded is what encodeRows did.
type encoded struct {
	rows        uint32
	first, last int64 // oldest and newest event time, ms
	tallies     []ingest.DropTally
	late        map[string]lateSpan // site events older than encodeRows' lateBefore
	lateClicks  *lateSpan           // clicks older than it
	err         error
}

// encodeChunk is how many bytes of rows go to the insert at a time.
const encodeChunk = 256 << 10

var chunkPool = sync.Pool{New: func() any { b := make([]byte, 0, encodeChunk+64<<10); return &b }}

// encodeRows verifies raw and writes its events to w as RowBinary rows
// of the events table, each with its segment identity and record number.
// Site events older than lateBefore (ms) are spanned per site in late.
func encodeRows(raw []byte, ref ingest.SegmentRef, w io.Writer, lateBefore int64) encoded {
	var e encoded
	bp := chunkPool.Get().(*[]byte)
	defer chunkPool.Put(bp)
	chunk := (*bp)[:0]
	identity := appendString(nil, ref.Node)
	identity = binary.LittleEndian.AppendUint64(identity, ref.Inc)
	identity = binary.LittleEndian.AppendUint64(identity, ref.Seq)
	_, e.err = ingest.ReadSegmentParts(raw, func(_ []byte, ev *ingest.Event) error {
		if e.rows == 0 || ev.Time < e.first {
			e.first = ev.Time
		}
		if e.rows == 0 || ev.Time > e.last {
			e.last = ev.Time
		}
		if ev.Time < lateBefore && ev.SiteID != "" && ev.Code == "" {
			if e.late == nil {
				e.late = make(map[string]lateSpan)
			}
			s, ok := e.late[ev.SiteID]
			if !ok {
				s = lateSpan{ev.Time, ev.Time}
			}
			e.late[ev.SiteID] = lateSpan{min(s.first, ev.Time), max(s.last, ev.Time)}
		}
		if ev.Time < lateBefore && ev.Kind == ingest.KindClick && ev.SiteID == "" {
			if e.lateClicks == nil {
				e.lateClicks = &lateSpan{ev.Time, ev.Time}
			}
			e.lateClicks.first, e.lateClicks.last = min(e.lateClicks.first, ev.Time), max(e.lateClicks.last, ev.Time)
		}
		chunk = appendEventFields(chunk, ev)
		chunk = append(chunk, identity...)
		chunk = binary.LittleEndian.AppendUint32(chunk, e.rows)
		e.rows++
		if len(chunk) >= encodeChunk {
			if _, err := w.Write(chunk); err != nil {
				return err
			}
			chunk = chunk[:0]
		}
		return nil
	}, func(t *ingest.DropTally) error {
		e.tallies = append(e.tallies, *t)
		return nil
	})
	if e.err == nil && len(chunk) > 0 {
		_, e.err = w.Write(chunk)
	}
	if cap(chunk) <= 4*encodeChunk {
		*bp = chunk[:0]
	}
	return e
}

type segmentRecord struct{ bytes, crc uint32 }

// segmentRecord returns the stored identity of ref, or nil.
func (c *Client) segmentRecord(ctx context.Context, ref ingest.SegmentRef) (*segmentRecord, error) {
	r, err := c.Query(ctx, fmt.Sprintf("SELECT bytes, crc FROM segments WHERE node = %s AND inc = %d AND seq = %d AND part = %d LIMIT 1",
		String(ref.Node), ref.Inc, ref.Seq, ref.Part))
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

// insertTallies stores a segment's drop tallies, each keyed by the
// segment identity and its place among the tallies, before the identity
// is recorded: a retry inserts them again and the copies collapse.
func (c *Client) insertTallies(ctx context.Context, ref ingest.SegmentRef, tallies []ingest.DropTally) error {
	if len(tallies) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("INSERT INTO drop_tallies (scope, name, hour, count, seg_node, seg_inc, seg_seq, seg_rec) VALUES ")
	for i := range tallies {
		t := &tallies[i]
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "(%d, %s, %s, %d, %s, %d, %d, %d)", t.Scope, String(t.Name),
			DateTime(time.Unix(t.Hour*3600, 0)), t.Count, String(ref.Node), ref.Inc, ref.Seq, i)
	}
	if err := c.Exec(ctx, b.String()); err != nil {
		return fmt.Errorf("cannot store the drop tallies of segment %d of %q: %w", ref.Seq, ref.Node, err)
	}
	return nil
}
