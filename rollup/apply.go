package rollup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/waymark/waymark/ingest"
)

// verifiedSegment is a segment whose header and every record passed
// ingest.ReadSegmentRecords, decoded and ready to apply.
type verifiedSegment struct {
	ref      ingest.SegmentRef
	size     int
	crc      uint32
	events   []ingest.Event
	payloads [][]byte // each event's encoding, aliasing the request body
	tallies  []ingest.DropTally
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// verifySegment checks raw with ingest.ReadSegmentRecords and keeps its
// events. A damaged segment returns an error wrapping
// ingest.ErrCorruptSegment and no events: everything is checked before
// the first one is delivered.
func verifySegment(raw []byte, seg *verifiedSegment) error {
	seg.events = seg.events[:0]
	seg.payloads = seg.payloads[:0]
	seg.tallies = seg.tallies[:0]
	h, err := ingest.ReadSegmentParts(raw, func(payload []byte, ev *ingest.Event) error {
		e := *ev
		if len(ev.Props) > 0 {
			e.Props = append([]ingest.Prop(nil), ev.Props...) // ReadSegment reuses the slice
		} else {
			e.Props = nil
		}
		seg.events = append(seg.events, e)
		seg.payloads = append(seg.payloads, payload)
		return nil
	}, func(t *ingest.DropTally) error {
		seg.tallies = append(seg.tallies, *t)
		return nil
	})
	if err != nil {
		seg.events = seg.events[:0]
		seg.payloads = seg.payloads[:0]
		seg.tallies = seg.tallies[:0]
		return err
	}
	seg.ref = h.Ref()
	seg.size = len(raw)
	seg.crc = crc32.Checksum(raw, castagnoli)
	return nil
}

// segmentRecord is what the S table keeps of an applied segment: enough to
// tell a retry (same bytes) from a different segment under the same
// identity (a restored or cloned edge).
type segmentRecord struct {
	receivedMS int64
	events     uint32
	size       uint32
	crc        uint32
}

func (r segmentRecord) encode() []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 20), uint64(r.receivedMS))
	b = binary.BigEndian.AppendUint32(b, r.events)
	b = binary.BigEndian.AppendUint32(b, r.size)
	return binary.BigEndian.AppendUint32(b, r.crc)
}

func decodeSegmentRecord(v []byte) (segmentRecord, error) {
	if len(v) != 20 {
		return segmentRecord{}, fmt.Errorf("cannot decode segment record: %d bytes; want 20", len(v))
	}
	return segmentRecord{
		receivedMS: int64(binary.BigEndian.Uint64(v)),
		events:     binary.BigEndian.Uint32(v[8:]),
		size:       binary.BigEndian.Uint32(v[12:]),
		crc:        binary.BigEndian.Uint32(v[16:]),
	}, nil
}

// applyResult says what one apply did, for metrics, logs and the answer.
type applyResult struct {
	applied, duplicate, conflict int // segments
	stored                       int // events
	expired, future              int // events dropped for their time
	late                         int // events older than the late window
	acked                        []ingest.SegmentRef
	rejected                     []ingest.SegmentRejection
}

// counterKey names one exact counter of one day.
type counterKey struct {
	day   day
	class byte
	name  string
}

// apply stores the segments that were not applied before, all in one
// Pebble batch committed with Sync: their raw blocks, segment records and
// journal entries. It returns the identities that are now durably stored
// (the ones it applied and the ones applied earlier) and the ones refused.
// On error nothing was stored and nothing may be acknowledged.
//
// The stored events are then folded into the pending aggregation, which a
// checkpoint writes (checkpoint.go). A fold or checkpoint that fails after
// the commit does not take the acknowledgement back: the journal holds
// the segments, and they are folded again before anything else.
func (a *Aggregator) apply(segs []*verifiedSegment) (applyResult, error) {
	var res applyResult
	if err := a.enterWriter(); err != nil {
		return res, err
	}
	defer a.leave()
	start := time.Now()
	defer a.m.applyDuration.UpdateDuration(start)

	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pend.broken {
		if err := a.resync(); err != nil {
			return applyResult{}, err
		}
	}

	now := a.cfg.Now()
	nowMS := now.UnixMilli()
	fresh, err := a.classify(segs, nowMS, &res)
	if err != nil {
		return applyResult{}, err
	}
	if len(fresh) == 0 {
		a.countApply(&res)
		return res, nil // duplicates' records were fsynced when first applied
	}

	// The batch is mostly the segments' records, copied once into blocks:
	// sized up front, it is not copied again each time it grows.
	room := 0
	for _, seg := range fresh {
		room += seg.size + batchRoomPerSegment
	}
	b := a.db.NewBatchWithSize(room)
	defer b.Close()
	sizes := make(map[day]dayStat)
	stored := a.storedScratch[:0]
	next := a.journalNext
	if err := a.stageSegments(b, fresh, now, sizes, &next, &stored, &res); err != nil {
		return applyResult{}, err
	}
	if err := a.preloadVisitors(stored); err != nil {
		return applyResult{}, err
	}
	if err := stageDays(b, sizes); err != nil {
		return applyResult{}, err
	}
	if err := a.feedClicks(stored); err != nil { // webhooks (clickhook.go)
		return applyResult{}, err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return applyResult{}, fmt.Errorf("cannot commit segment batch: %w", err)
	}
	a.journalNext = next
	a.afterCommit(sizes)
	a.countApply(&res)
	err = a.foldStored(stored, next)
	if err == nil {
		a.checkClickLimits(a.pend.f.d)
	}
	if err == nil && a.checkpointDue() {
		err = a.checkpoint()
	}
	if err != nil {
		a.log.Error("cannot fold stored segments; they are folded again from the journal", "err", err)
	}
	clear(stored)
	a.storedScratch = stored[:0]
	return res, nil
}

// stageSegments stages each fresh segment's events (those retention and
// the clock accept) as raw blocks with its segment records and journal
// entry, and collects the stored events in stored.
func (a *Aggregator) stageSegments(b *pebble.Batch, fresh []*verifiedSegment, now time.Time, sizes map[day]dayStat,
	next *uint64, stored *[]*ingest.Event, res *applyResult) error {
	nowMS := now.UnixMilli()
	cutoff := a.cutoffDay(now)
	maxMS := now.Add(futureSlack).UnixMilli()
	lateMS := nowMS - a.cfg.LateWindow.Milliseconds()
	recvDay := dayOf(nowMS)
	blocks := &a.blocks
	for _, seg := range fresh {
		blocks.reset()
		n := uint32(0)
		for i := range seg.events {
			ev := &seg.events[i]
			d := dayOf(ev.Time)
			switch {
			case d < cutoff:
				res.expired++
				continue
			case ev.Time > maxMS:
				res.future++
				continue
			case ev.Time < lateMS:
				res.late++
			}
			blocks.add(d, ev.Time, seg.payloads[i])
			*stored = append(*stored, ev)
			n++
		}
		if err := stageTallies(b, seg.tallies, cutoff, maxMS, &a.tallyKey, &a.tallyVal); err != nil {
			return err
		}
		entry, err := blocks.stage(b, seg.ref, sizes, a.journalScratch[:0])
		if err != nil {
			return err
		}
		a.journalScratch = entry
		if len(entry) > 0 {
			if err := b.Set(journalKey(*next), entry, nil); err != nil {
				return fmt.Errorf("cannot stage journal entry: %w", err)
			}
			*next++
		}
		rec := segmentRecord{receivedMS: nowMS, events: n, size: uint32(seg.size), crc: seg.crc}
		if err := b.Set(segmentKey(seg.ref), rec.encode(), nil); err != nil {
			return fmt.Errorf("cannot stage segment record: %w", err)
		}
		if err := b.Set(segmentDayKey(expiryDay(seg, recvDay), seg.ref), nil, nil); err != nil {
			return fmt.Errorf("cannot stage segment record: %w", err)
		}
		res.applied++
		res.stored += int(n)
		res.acked = append(res.acked, seg.ref)
	}
	return nil
}

// batchRoomPerSegment is what a segment adds to its batch besides its
// records: block headers and keys, its records and journal entry.
const batchRoomPerSegment = 1 << 10

// expiryDay is the day with whose retention a segment's record goes: the
// day of its newest event, so that once the record is gone every event of
// the segment is past retention, and sending it again stores nothing.
func expiryDay(seg *verifiedSegment, recvDay day) day {
	if len(seg.events) == 0 {
		return recvDay
	}
	newest := seg.events[0].Time
	for i := range seg.events {
		newest = max(newest, seg.events[i].Time)
	}
	return dayOf(newest)
}

// classify splits segs into the ones to apply and the ones already
// applied (acknowledged again) or in conflict with an applied one (same
// identity, other bytes: refused, never acknowledged).
func (a *Aggregator) classify(segs []*verifiedSegment, nowMS int64, res *applyResult) ([]*verifiedSegment, error) {
	var fresh []*verifiedSegment
	inBatch := make(map[ingest.SegmentRef]*verifiedSegment)
	for _, seg := range segs {
		var size, crc uint32
		known := false
		if prev := inBatch[seg.ref]; prev != nil {
			size, crc, known = uint32(prev.size), prev.crc, true
		} else {
			v, closer, err := a.db.Get(segmentKey(seg.ref))
			switch {
			case errors.Is(err, pebble.ErrNotFound):
			case err != nil:
				return nil, fmt.Errorf("cannot look up segment %d of %q: %w", seg.ref.Seq, seg.ref.Node, err)
			default:
				rec, derr := decodeSegmentRecord(v)
				closer.Close()
				if derr != nil {
					return nil, derr
				}
				size, crc, known = rec.size, rec.crc, true
			}
		}
		switch {
		case !known:
			inBatch[seg.ref] = seg
			fresh = append(fresh, seg)
		case size == uint32(seg.size) && crc == seg.crc:
			res.duplicate++
			res.acked = append(res.acked, seg.ref)
		default:
			res.conflict++
			res.rejected = append(res.rejected, ingest.SegmentRejection{SegmentRef: seg.ref, Reason: ingest.RejectConflict})
			a.log.Error("refused a segment whose identity was already used for other bytes (a restored or cloned data folder?)",
				"node", seg.ref.Node, "inc", seg.ref.Inc, "seq", seg.ref.Seq, "bytes", seg.size)
		}
	}
	return fresh, nil
}

// preloadVisitors reads, in one sorted pass, the stored states of the
// visitors the events' site events will need and memory lacks.
func (a *Aggregator) preloadVisitors(evs []*ingest.Event) error {
	keys := a.preloadScratch[:0]
	for _, ev := range evs {
		if ev.SiteID == "" || ev.Kind == ingest.KindClick || ev.Bot() {
			continue
		}
		site := a.visitors.siteID(ev.SiteID)
		d := uint32(dayOf(ev.Time))
		keys = append(keys, visitorKey{site, d, ev.VisitorHash})
		if ev.PrevVisitorHash != 0 && d > 0 {
			keys = append(keys, visitorKey{site, d - 1, ev.PrevVisitorHash})
		}
	}
	a.preloadScratch = keys[:0]
	return a.visitors.preload(keys)
}

// countEvent adds one stored event to the per-day counters of its classes.
func countEvent(deltas map[counterKey]int64, d day, ev *ingest.Event) {
	bot := ev.Bot()
	deltas[counterKey{d, classAll, ""}]++
	if bot {
		deltas[counterKey{d, classBots, ""}]++
	}
	if ev.Code != "" {
		deltas[counterKey{d, classCode, ev.Code}]++
		if bot {
			deltas[counterKey{d, classCodeBot, ev.Code}]++
		}
	}
	if ev.SiteID != "" {
		deltas[counterKey{d, classSite, ev.SiteID}]++
		if bot {
			deltas[counterKey{d, classSiteBot, ev.SiteID}]++
		}
	}
}

// stageApply writes the pending aggregation's counters, rollups and
// visitor states.
func (a *Aggregator) stageApply(b *pebble.Batch, f *folder, deltas map[counterKey]int64, now time.Time) error {
	if err := stageCounters(b, deltas); err != nil {
		return err
	}
	if err := f.d.flush(b, a.tiers(now), a.sketches.touch); err != nil {
		return err
	}
	return a.visitors.stage(b, now.UnixMilli()-a.cfg.LateWindow.Milliseconds()-visitGapMS)
}

// stageCounters adds the per-day event counts to the D rows and the
// totals, as merge operands.
func stageCounters(b *pebble.Batch, deltas map[counterKey]int64) error {
	type totalKey struct {
		class byte
		name  string
	}
	totals := make(map[totalKey]int64, len(deltas))
	var kb, vb []byte
	for k, n := range deltas {
		totals[totalKey{k.class, k.name}] += n
		kb = appendDayCounterKey(kb[:0], k.day, k.class, k.name)
		if err := mergeCount(b, kb, n, &vb); err != nil {
			return err
		}
	}
	for k, n := range totals {
		kb = appendTotalKey(kb[:0], k.class, k.name)
		if err := mergeCount(b, kb, n, &vb); err != nil {
			return err
		}
	}
	return nil
}

// stageDays adds the stored blocks' events and bytes to the day records.
func stageDays(b *pebble.Batch, sizes map[day]dayStat) error {
	var vb []byte
	for d, st := range sizes {
		c := counters{int64(st.events), int64(st.bytes)}
		vb = appendCounters(vb[:0], &c)
		if err := b.Merge(dayKey(d), vb, nil); err != nil {
			return fmt.Errorf("cannot stage day record: %w", err)
		}
	}
	return nil
}

// mergeCount adds n to the one-number counter at key.
func mergeCount(b *pebble.Batch, key []byte, n int64, vb *[]byte) error {
	c := counters{n}
	*vb = appendCounters((*vb)[:0], &c)
	if err := b.Merge(key, *vb, nil); err != nil {
		return fmt.Errorf("cannot stage counter: %w", err)
	}
	return nil
}

// afterCommit updates what memory mirrors of the day records.
func (a *Aggregator) afterCommit(sizes map[day]dayStat) {
	for day, add := range sizes {
		cur := a.days[day]
		a.days[day] = dayStat{cur.events + add.events, cur.bytes + add.bytes}
		a.gens[day]++
	}
	a.updateGauges()
}

// cutoffDay is the first day retention keeps at now: every event of an
// earlier day is older than Retention.
func (a *Aggregator) cutoffDay(now time.Time) day {
	return dayOf(now.Add(-a.cfg.Retention).UnixMilli())
}

func (a *Aggregator) countApply(res *applyResult) {
	a.m.segmentsApplied.Add(res.applied)
	a.m.segmentsDuplicate.Add(res.duplicate)
	a.m.segmentsConflict.Add(res.conflict)
	a.m.eventsStored.Add(res.stored)
	a.m.eventsExpired.Add(res.expired)
	a.m.eventsFuture.Add(res.future)
	a.rm.eventsLate.Add(res.late)
}

// takeDelta returns the delta kept from the last batch, or a new one.
// Callers hold a.mu.
func (a *Aggregator) takeDelta() *delta {
	if d := a.spareDelta; d != nil {
		a.spareDelta = nil
		return d
	}
	return newDelta()
}

// keepDelta keeps d, emptied, for the next batch.
func (a *Aggregator) keepDelta(d *delta) {
	if d.reset() {
		a.spareDelta = d
	}
}
