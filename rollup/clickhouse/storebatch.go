package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"time"

	"github.com/waymark/waymark/ingest"
)

// A shipped batch stored with one identity lookup, one events insert and
// one identity insert, where StoreSegment spends three requests on each
// segment. With several aggregators an edge cuts every segment into a
// part per partition (up to 64), so a batch holds many small parts, and
// an insert apiece made ClickHouse write a part of its own for a few dozen
// rows each (two aggregators took 0.006 of the raw insert rate in
// bench/README's issue 14 run). Exactly once holds as for one segment:
// every identity is recorded after all the batch's events are in, and a
// retried record collapses onto its first copy by its key.

// storeBatch stores raws in order; out[i] and errs[i] are what
// storeSegment would have answered for raws[i]. When the shared insert
// fails (a segment that does not verify, an insert refused), every
// segment not known before is stored on its own, so one bad segment
// costs only itself.
func (c *Client) storeBatch(ctx context.Context, raws [][]byte, late *lateMarker) ([]StoreResult, []error) {
	out, errs := make([]StoreResult, len(raws)), make([]error, len(raws))
	if len(raws) == 1 {
		out[0], errs[0] = c.storeSegmentMarking(ctx, raws[0], late)
		return out, errs
	}
	type item struct {
		i         int
		ref       ingest.SegmentRef
		size, crc uint32
	}
	var items []item
	for i, raw := range raws {
		h, err := ingest.PeekSegmentHeader(raw)
		if err != nil {
			errs[i] = fmt.Errorf("cannot read segment: %w", err)
			c.m.segMalformed.Inc()
			continue
		}
		out[i].Ref = h.Ref()
		items = append(items, item{i, h.Ref(), uint32(len(raw)), crc32.Checksum(raw, castagnoli)})
	}
	refs := make([]ingest.SegmentRef, len(items))
	for k, it := range items {
		refs[k] = it.ref
	}
	known, err := c.segmentRecords(ctx, refs)
	if err != nil {
		for _, it := range items {
			errs[it.i] = err
			c.m.segFailed.Inc()
		}
		return out, errs
	}
	var fresh []item
	for _, it := range items {
		rec, ok := known[it.ref]
		switch {
		case !ok:
			fresh = append(fresh, it)
		case rec.bytes == it.size && rec.crc == it.crc:
			out[it.i].Outcome = Duplicate
			c.m.segDuplicate.Inc()
		default: // the single path says conflict or damage
			out[it.i], errs[it.i] = c.storeSegmentMarking(ctx, raws[it.i], late)
		}
	}
	if len(fresh) == 0 {
		return out, errs
	}

	pr, pw := io.Pipe()
	encs := make(chan []encoded, 1)
	go func() {
		var before int64
		if late != nil {
			before = late.before
		}
		all := make([]encoded, len(fresh))
		for k, it := range fresh {
			all[k] = encodeRows(raws[it.i], it.ref, pw, before)
			if all[k].err != nil {
				pw.CloseWithError(all[k].err)
				encs <- all
				return
			}
		}
		pw.Close()
		encs <- all
	}()
	t0 := time.Now()
	err = c.Insert(ctx, "INSERT INTO events FORMAT RowBinary", pr, testInsertSettings)
	pr.CloseWithError(errInsertEnded)
	all := <-encs
	for k := range all {
		if all[k].err != nil && err == nil {
			err = fmt.Errorf("BUG: the insert of a batch succeeded without all its rows: %w", all[k].err)
		}
	}
	if err != nil {
		// Each on its own: a damaged segment is refused alone, and what
		// the failed insert got in collapses onto the retry's copy.
		for _, it := range fresh {
			out[it.i], errs[it.i] = c.storeSegmentMarking(ctx, raws[it.i], late)
		}
		return out, errs
	}
	c.m.insertDuration.UpdateDuration(t0)
	failAll := func(err error) ([]StoreResult, []error) {
		for _, it := range fresh {
			errs[it.i] = err
			c.m.segFailed.Inc()
		}
		return out, errs
	}
	spans := make(map[string]lateSpan)
	var clicks *lateSpan
	for k, it := range fresh {
		e := &all[k]
		c.m.eventsInserted.Add(int(e.rows))
		out[it.i].Events = int(e.rows)
		if err := c.insertTallies(ctx, it.ref, e.tallies); err != nil {
			return failAll(err)
		}
		for site, s := range e.late {
			if o, ok := spans[site]; ok {
				s = lateSpan{min(o.first, s.first), max(o.last, s.last)}
			}
			spans[site] = s
		}
		if e.lateClicks != nil {
			if clicks == nil {
				clicks = &lateSpan{e.lateClicks.first, e.lateClicks.last}
			}
			clicks.first, clicks.last = min(clicks.first, e.lateClicks.first), max(clicks.last, e.lateClicks.last)
		}
	}
	if late != nil && (len(spans) > 0 || clicks != nil) {
		if err := late.mark(ctx, spans, clicks); err != nil {
			return failAll(err)
		}
	}
	var b strings.Builder
	b.WriteString("INSERT INTO segments (node, inc, seq, part, bytes, crc, events, first_time, last_time, stored) VALUES ")
	now := DateTime(time.Now())
	for k, it := range fresh {
		if k > 0 {
			b.WriteString(", ")
		}
		e := &all[k]
		fmt.Fprintf(&b, "(%s, %d, %d, %d, %d, %d, %d, %s, %s, %s)", String(it.ref.Node), it.ref.Inc, it.ref.Seq, it.ref.Part,
			it.size, it.crc, e.rows, DateTime(time.UnixMilli(e.first)), DateTime(time.UnixMilli(e.last)), now)
	}
	if err := c.Exec(ctx, b.String()); err != nil {
		return failAll(fmt.Errorf("cannot record a batch of %d segments: %w", len(fresh), err))
	}
	for _, it := range fresh {
		out[it.i].Outcome = Stored
		c.m.segStored.Inc()
	}
	return out, errs
}

// segmentRecords returns the stored identities among refs.
func (c *Client) segmentRecords(ctx context.Context, refs []ingest.SegmentRef) (map[ingest.SegmentRef]segmentRecord, error) {
	out := make(map[ingest.SegmentRef]segmentRecord)
	if len(refs) == 0 {
		return out, nil
	}
	var b strings.Builder
	b.WriteString("SELECT node, inc, seq, part, bytes, crc FROM segments WHERE (node, inc, seq, part) IN (")
	for k, r := range refs {
		if k > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "(%s, %d, %d, %d)", String(r.Node), r.Inc, r.Seq, r.Part)
	}
	b.WriteString(")")
	res, err := c.Query(ctx, b.String())
	if err != nil {
		return nil, fmt.Errorf("cannot look up a batch of %d segments: %w", len(refs), err)
	}
	for _, raw := range res.Data {
		row := rawRow(raw)
		node, err1 := row[0].str()
		inc, err2 := row[1].uint()
		seq, err3 := row[2].uint()
		part, err4 := row[3].uint()
		size, err5 := row[4].uint()
		crc, err6 := row[5].uint()
		if err := errors.Join(err1, err2, err3, err4, err5, err6); err != nil {
			return nil, fmt.Errorf("cannot read a batch's segment records: %w", err)
		}
		out[ingest.SegmentRef{Node: node, Inc: inc, Seq: seq, Part: uint16(part)}] = segmentRecord{uint32(size), uint32(crc)}
	}
	return out, nil
}
