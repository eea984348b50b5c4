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
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// verifySegment checks raw with ingest.ReadSegmentRecords and keeps its
// events. A damaged segment returns an error wrapping
// ingest.ErrCorruptSegment and no events: everything is checked before
// the first one is delivered.
func verifySegment(raw []byte, seg *verifiedSegment) error {
	seg.events = seg.events[:0]
	seg.payloads = seg.payloads[:0]
	h, err := ingest.ReadSegmentRecords(raw, func(payload []byte, ev *ingest.Event) error {
		e := *ev
		if len(ev.Props) > 0 {
			e.Props = append([]ingest.Prop(nil), ev.Props...) // ReadSegment reuses the slice
		} else {
			e.Props = nil
		}
		seg.events = append(seg.events, e)
		seg.payloads = append(seg.payloads, payload)
		return nil
	})
	if err != nil {
		seg.events = seg.events[:0]
		seg.payloads = seg.payloads[:0]
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
// Pebble batch committed with Sync, together with their segment records,
// their folded rollups and the visitor states they changed. It returns the
// identities that are now durably stored (the ones it applied and the
// ones applied earlier) and the ones refused. On error nothing was stored
// and nothing may be acknowledged.
func (a *Aggregator) apply(segs []*verifiedSegment) (applyResult, error) {
	var res applyResult
	if err := a.enter(); err != nil {
		return res, err
	}
	defer a.leave()
	start := time.Now()
	defer a.m.applyDuration.UpdateDuration(start)

	a.mu.Lock()
	defer a.mu.Unlock()

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

	b := a.db.NewBatch()
	defer b.Close()
	f := &folder{d: a.takeDelta(), src: a.visitors}
	defer a.keepDelta(f.d)
	if err := a.preloadVisitors(fresh, nowMS); err != nil {
		return applyResult{}, err
	}
	deltas := make(map[counterKey]int64)
	sizes := make(map[day]dayStat)
	cutoff := a.cutoffDay(now)
	maxMS := now.Add(futureSlack).UnixMilli()
	lateMS := nowMS - a.cfg.LateWindow.Milliseconds()
	recvDay := dayOf(nowMS)
	blocks := &a.blocks
	for _, seg := range fresh {
		blocks.reset()
		stored := uint32(0)
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
			countEvent(deltas, d, ev)
			a.visitors.newestMS = max(a.visitors.newestMS, ev.Time)
			if _, err := f.fold(ev); err != nil {
				a.visitors.failed()
				return applyResult{}, err
			}
			blocks.add(d, ev.Time, seg.payloads[i])
			stored++
		}
		if err := blocks.stage(b, seg.ref, sizes); err != nil {
			a.visitors.failed()
			return applyResult{}, err
		}
		rec := segmentRecord{receivedMS: nowMS, events: stored, size: uint32(seg.size), crc: seg.crc}
		if err := b.Set(segmentKey(seg.ref), rec.encode(), nil); err != nil {
			a.visitors.failed()
			return applyResult{}, fmt.Errorf("cannot stage segment record: %w", err)
		}
		if err := b.Set(segmentDayKey(expiryDay(seg, recvDay), seg.ref), nil, nil); err != nil {
			a.visitors.failed()
			return applyResult{}, fmt.Errorf("cannot stage segment record: %w", err)
		}
		res.applied++
		res.stored += int(stored)
		res.acked = append(res.acked, seg.ref)
	}
	a.visitors.closeIdle(f, nowMS)
	if err := a.stageApply(b, f, deltas, sizes, now); err != nil {
		a.visitors.failed()
		a.sketches.discard()
		return applyResult{}, err
	}
	if err := a.sketches.commit(func() error { return b.Commit(pebble.Sync) }); err != nil {
		a.visitors.failed()
		a.sketches.discard()
		return applyResult{}, fmt.Errorf("cannot commit segment batch: %w", err)
	}
	a.visitors.committed()
	a.afterCommit(f.d, sizes)
	a.countApply(&res)
	return res, nil
}

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
// visitors the fresh segments' site events will need and memory lacks.
func (a *Aggregator) preloadVisitors(segs []*verifiedSegment, nowMS int64) error {
	var keys []visitorKey
	for _, seg := range segs {
		for i := range seg.events {
			ev := &seg.events[i]
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
	}
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

// stageApply writes the batch's counters, rollups and visitor states.
func (a *Aggregator) stageApply(b *pebble.Batch, f *folder, deltas map[counterKey]int64, sizes map[day]dayStat, now time.Time) error {
	if err := stageCounters(b, deltas, sizes); err != nil {
		return err
	}
	if err := f.d.flush(b, a.tiers(now), a.sketches.touch); err != nil {
		return err
	}
	return a.visitors.stage(b, now.UnixMilli()-a.cfg.LateWindow.Milliseconds()-visitGapMS)
}

// stageCounters adds the per-day event counts to the D rows, the totals
// and the day records, as merge operands.
func stageCounters(b *pebble.Batch, deltas map[counterKey]int64, sizes map[day]dayStat) error {
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

// afterCommit updates what memory mirrors of the database and starts the
// click-limit checks.
func (a *Aggregator) afterCommit(d *delta, sizes map[day]dayStat) {
	for day, add := range sizes {
		cur := a.days[day]
		a.days[day] = dayStat{cur.events + add.events, cur.bytes + add.bytes}
		a.gens[day]++
	}
	a.checkClickLimits(d)
	a.updateGauges()
	a.m.activeVisitors.Set(float64(len(a.visitors.active)))
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
