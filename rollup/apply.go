package rollup

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/waymark/waymark/ingest"
)

// verifiedSegment is a segment whose header and every record passed
// ingest.ReadSegment, re-encoded and ready to apply.
type verifiedSegment struct {
	ref    ingest.SegmentRef
	enc    []byte // the events' encodings, back to back
	events []pendingEvent
}

// pendingEvent is what apply needs of one event; enc[off:end] is the event.
type pendingEvent struct {
	id       [16]byte
	time     int64
	bot      bool
	code     string
	site     string
	off, end int
	// ev is the decoded event (without props) for the rollups.
	ev ingest.Event
}

// verifySegment checks raw with ingest.ReadSegment and keeps its events. A
// damaged segment returns an error wrapping ingest.ErrCorruptSegment and no
// events: ReadSegment checks everything before delivering the first one.
func verifySegment(raw []byte, seg *verifiedSegment) error {
	seg.enc = seg.enc[:0]
	seg.events = seg.events[:0]
	h, err := ingest.ReadSegment(raw, func(ev *ingest.Event) error {
		off := len(seg.enc)
		seg.enc = ingest.AppendEvent(seg.enc, ev)
		seg.events = append(seg.events, pendingEvent{
			id: ev.ID, time: ev.Time, bot: ev.Bot(),
			code: ev.Code, site: ev.SiteID,
			off: off, end: len(seg.enc),
		})
		last := &seg.events[len(seg.events)-1]
		last.ev = *ev
		last.ev.Props = nil // reused by ReadSegment; rollups do not use props
		return nil
	})
	if err != nil {
		seg.enc = seg.enc[:0]
		seg.events = seg.events[:0]
		return err
	}
	seg.ref = h.Ref()
	return nil
}

// applyResult says what one apply did, for metrics and logs.
type applyResult struct {
	applied, duplicate   int // segments
	stored, deduplicated int // events
	expired, future      int // events dropped for their time
	late                 int // events stored raw only: past the late window
	acked                []ingest.SegmentRef
}

// counterKey names one exact counter of one day.
type counterKey struct {
	day   day
	class byte
	name  string
}

// applyState is the scratch of one apply: the batch and what it adds.
type applyState struct {
	b       *pebble.Batch
	deltas  map[counterKey]uint64
	dayAdds map[day]dayStat
	inBatch map[ingest.SegmentRef]bool
	// ids are the events staged so far, with their day: the batch is not
	// indexed, so repeats inside it are found here.
	ids map[[16]byte]day
	kb  []byte
	// fold gets every stored event inside the late window; its delta and
	// visitor states are staged in the same batch.
	fold    *folder
	lateMS  int64 // events before this are stored raw only
	lateErr error
}

func (s *applyState) count(d day, class byte, name string) {
	s.deltas[counterKey{d, class, name}]++
}

// apply stores the segments that were not applied before, all in one
// Pebble batch committed with Sync, together with their segment records
// and counters. It returns the identities that are now durably stored:
// the ones it applied and the ones applied earlier. On error nothing was
// stored and nothing may be acknowledged.
func (a *Aggregator) apply(segs []*verifiedSegment) (applyResult, error) {
	var res applyResult
	if err := a.enter(); err != nil {
		return res, err
	}
	defer a.leave()
	start := time.Now()
	defer a.m.applyDuration.UpdateDuration(start)

	now := a.cfg.Now()
	nowMS := now.UnixMilli()
	cutoff := a.cutoffDay(now)
	maxMS := now.Add(futureSlack).UnixMilli()
	window := a.cfg.DedupWindow.Milliseconds()
	recvDay := dayOf(nowMS)

	a.mu.Lock()
	defer a.mu.Unlock()

	st := applyState{
		b:       a.db.NewBatch(),
		deltas:  make(map[counterKey]uint64),
		dayAdds: make(map[day]dayStat),
		inBatch: make(map[ingest.SegmentRef]bool),
		ids:     make(map[[16]byte]day),
		fold:    newFolder(func(k visitorKey) ([]run, error) { return loadVisitor(a.db, k) }),
		lateMS:  nowMS - a.cfg.LateWindow.Milliseconds(),
	}
	defer st.b.Close()
	if err := a.preloadVisitors(&st, segs); err != nil {
		return applyResult{}, err
	}

	for _, seg := range segs {
		segKey := segmentKey(seg.ref)
		if st.inBatch[seg.ref] {
			res.duplicate++
			res.acked = append(res.acked, seg.ref)
			continue
		}
		done, err := has(a.db, segKey)
		if err != nil {
			return applyResult{}, fmt.Errorf("cannot look up segment %d of %q: %w", seg.ref.Seq, seg.ref.Node, err)
		}
		if done {
			res.duplicate++
			res.acked = append(res.acked, seg.ref)
			continue
		}
		var stored, dups uint32
		for i := range seg.events {
			ev := &seg.events[i]
			d := dayOf(ev.time)
			switch {
			case d < cutoff:
				res.expired++
				continue
			case ev.time > maxMS:
				res.future++
				continue
			}
			dup, err := a.seen(&st, ev, window)
			if err != nil {
				return applyResult{}, err
			}
			if dup {
				dups++
				continue
			}
			late := ev.time < st.lateMS
			if err := a.stage(&st, d, ev, seg.enc[ev.off:ev.end], late); err != nil {
				return applyResult{}, err
			}
			if late {
				res.late++
			} else if err := st.fold.fold(&ev.ev); err != nil {
				return applyResult{}, err
			}
			stored++
		}
		rec := binary.BigEndian.AppendUint64(make([]byte, 0, 16), uint64(nowMS))
		rec = binary.BigEndian.AppendUint32(rec, stored)
		rec = binary.BigEndian.AppendUint32(rec, dups)
		if err := st.b.Set(segKey, rec, nil); err != nil {
			return applyResult{}, fmt.Errorf("cannot stage segment record: %w", err)
		}
		if err := st.b.Set(segmentDayKey(recvDay, seg.ref), nil, nil); err != nil {
			return applyResult{}, fmt.Errorf("cannot stage segment record: %w", err)
		}
		st.inBatch[seg.ref] = true
		res.applied++
		res.stored += int(stored)
		res.deduplicated += int(dups)
		res.acked = append(res.acked, seg.ref)
	}
	if res.applied == 0 {
		// Only duplicates: their records were fsynced when first applied.
		a.countApply(&res)
		return res, nil
	}
	if err := a.stageCounters(&st); err != nil {
		return applyResult{}, err
	}
	if err := st.fold.d.flush(a.db, st.b); err != nil {
		return applyResult{}, err
	}
	if err := st.fold.stageVisitors(st.b, st.lateMS-visitGapMS); err != nil {
		return applyResult{}, err
	}
	if err := st.b.Commit(pebble.Sync); err != nil {
		return applyResult{}, fmt.Errorf("cannot commit segment batch: %w", err)
	}
	a.checkClickLimits(st.fold.d)
	for d, add := range st.dayAdds {
		cur := a.days[d]
		a.days[d] = dayStat{cur.events + add.events, cur.bytes + add.bytes}
	}
	a.countApply(&res)
	a.updateGauges()
	return res, nil
}

// preloadVisitors reads, in one sorted pass, the stored state of every
// visitor whose events fold may reach: site events that are not bots and
// not past the late window, of segments not applied before. Reading a few
// too many (an event that turns out to be a duplicate) changes nothing:
// only states that fold changes are written back.
func (a *Aggregator) preloadVisitors(st *applyState, segs []*verifiedSegment) error {
	var keys []visitorKey
	for _, seg := range segs {
		done, err := has(a.db, segmentKey(seg.ref))
		if err != nil {
			return fmt.Errorf("cannot look up segment %d of %q: %w", seg.ref.Seq, seg.ref.Node, err)
		}
		if done {
			continue
		}
		for i := range seg.events {
			ev := &seg.events[i].ev
			if ev.SiteID == "" || ev.Kind == ingest.KindClick || ev.Bot() || ev.Time < st.lateMS {
				continue
			}
			keys = append(keys, visitorKey{ev.SiteID, ev.VisitorHash})
		}
	}
	return st.fold.preload(a.db, keys)
}

// seen reports whether ev's id is already held on a day that the window
// around its time touches, or earlier in this batch. Days not held cannot
// hold it, so they cost no read.
func (a *Aggregator) seen(st *applyState, ev *pendingEvent, window int64) (bool, error) {
	lo, hi := dayOf(ev.time-window), dayOf(ev.time+window)
	if d, ok := st.ids[ev.id]; ok && d >= lo && d <= hi {
		return true, nil
	}
	for d := lo; d <= hi; d++ {
		if _, ok := a.days[d]; !ok {
			continue
		}
		st.kb = appendEventIDKey(st.kb[:0], d, &ev.id)
		found, err := has(a.db, st.kb)
		if err != nil {
			return false, fmt.Errorf("cannot look up event id: %w", err)
		}
		if found {
			return true, nil
		}
	}
	return false, nil
}

// stage adds one event, its id index entry and its counters to the batch.
// A late event's index entry carries lateFlag: it is in no rollup.
func (a *Aggregator) stage(st *applyState, d day, ev *pendingEvent, enc []byte, late bool) error {
	st.kb = appendEventKey(st.kb[:0], d, ev.time, &ev.id)
	size := len(st.kb) + len(enc)
	if err := st.b.Set(st.kb, enc, nil); err != nil {
		return fmt.Errorf("cannot stage event: %w", err)
	}
	st.kb = appendEventIDKey(st.kb[:0], d, &ev.id)
	var tb [9]byte
	binary.BigEndian.PutUint64(tb[:], uint64(ev.time))
	tv := tb[:8]
	if late {
		tb[8] = lateFlag
		tv = tb[:]
	}
	if err := st.b.Set(st.kb, tv, nil); err != nil {
		return fmt.Errorf("cannot stage event id: %w", err)
	}
	st.ids[ev.id] = d
	add := st.dayAdds[d]
	add.events++
	add.bytes += uint64(size)
	st.dayAdds[d] = add

	st.count(d, classAll, "")
	if ev.bot {
		st.count(d, classBots, "")
	}
	if ev.code != "" {
		st.count(d, classCode, ev.code)
		if ev.bot {
			st.count(d, classCodeBot, ev.code)
		}
	}
	if ev.site != "" {
		st.count(d, classSite, ev.site)
		if ev.bot {
			st.count(d, classSiteBot, ev.site)
		}
	}
	return nil
}

// stageCounters adds the batch's counter deltas to the per-day counters,
// the totals and the day records. Only the writer changes them, and it
// holds mu, so reading the committed value and adding is safe.
func (a *Aggregator) stageCounters(st *applyState) error {
	type totalKey struct {
		class byte
		name  string
	}
	totals := make(map[totalKey]uint64, len(st.deltas))
	var vb [8]byte
	for k, n := range st.deltas {
		totals[totalKey{k.class, k.name}] += n
		st.kb = appendDayCounterKey(st.kb[:0], k.day, k.class, k.name)
		if err := addCounter(a.db, st.b, st.kb, n, &vb); err != nil {
			return err
		}
	}
	for k, n := range totals {
		st.kb = appendTotalKey(st.kb[:0], k.class, k.name)
		if err := addCounter(a.db, st.b, st.kb, n, &vb); err != nil {
			return err
		}
	}
	for d, add := range st.dayAdds {
		cur := a.days[d]
		v := dayStat{cur.events + add.events, cur.bytes + add.bytes}.encode()
		if err := st.b.Set(dayKey(d), v, nil); err != nil {
			return fmt.Errorf("cannot stage day record: %w", err)
		}
	}
	return nil
}

func addCounter(db *pebble.DB, b *pebble.Batch, key []byte, n uint64, vb *[8]byte) error {
	cur, err := getUint64(db, key)
	if err != nil {
		return err
	}
	binary.BigEndian.PutUint64(vb[:], cur+n)
	if err := b.Set(key, vb[:], nil); err != nil {
		return fmt.Errorf("cannot stage counter: %w", err)
	}
	return nil
}

// cutoffDay is the first day retention keeps at now: every event of an
// earlier day is older than Retention.
func (a *Aggregator) cutoffDay(now time.Time) day {
	return dayOf(now.Add(-a.cfg.Retention).UnixMilli())
}

func (a *Aggregator) countApply(res *applyResult) {
	a.m.segmentsApplied.Add(res.applied)
	a.m.segmentsDuplicate.Add(res.duplicate)
	a.m.eventsStored.Add(res.stored)
	a.m.eventsDeduplicated.Add(res.deduplicated)
	a.m.eventsExpired.Add(res.expired)
	a.m.eventsFuture.Add(res.future)
	a.rm.eventsLate.Add(res.late)
}
