package rollup

import "slices"

// What a visit counts, and where (Plausible's two tables):
//
//   - as a session (sessions table: visits, bounce rate, duration, views
//     per visit): in the hour of its last event that is not an
//     engagement (Plausible buckets a session by its timestamp), and
//     again in a crossing row at every hour boundary it spans, so an
//     aggregate over [A, B) adds the crossing row at B: the sessions that
//     began before B and went on past it (Plausible counts a session in
//     every range it overlaps);
//   - as a visit with events (events table: uniq(session_id)): the same,
//     up to its last activity, engagement events included;
//   - its pageviews and custom events, under its visit dimensions, in the
//     hours they happened (Plausible counts events by visit dimension from
//     the events table, where each event carries its session's values).
//
// A visit's counts depend only on the set of its events, so when an event
// joins, the rows move from the old counts to the new ones: by the
// difference when the visit's dimension values stay, by taking the old
// counts back and adding the new ones where a value changed (a late event
// earlier than the first one, or the exit page), and wholesale when
// visits merge. Visitors under visit dimensions are counted as events
// arrive (visitDimVisitors), under the exit page when the visit ends
// (closeRun).

// hourCount is a visit's pageviews and custom events in one hour (both 0
// for an hour with engagement events only).
type hourCount struct {
	h      uint32
	pv, cu uint32
}

// maxEvHours bounds the hours kept per visit.
const maxEvHours = 256

// addEvHour counts events in hour h.
func addEvHour(hs []hourCount, h uint32, pv, cu uint32) []hourCount {
	for i := range hs {
		if hs[i].h == h {
			hs[i].pv += pv
			hs[i].cu += cu
			return hs
		}
	}
	if len(hs) >= maxEvHours {
		return hs
	}
	out := append(slices.Clone(hs), hourCount{h, pv, cu})
	slices.SortFunc(out, func(x, y hourCount) int { return int(x.h) - int(y.h) })
	return out
}

// mergeEvHours sums two visits' hours.
func mergeEvHours(a, b []hourCount) []hourCount {
	out := slices.Clone(a)
	for _, x := range b {
		out = addEvHour(out, x.h, x.pv, x.cu)
	}
	return out
}

// maxCrossings bounds the crossing rows of one visit: a visit of more than
// a day counts in aggregates that end within its first day only.
const maxCrossings = 24

// placement is part of what a visit counts: counters in one hour (or, with
// crossingBit, at one hour boundary).
type placement struct {
	h uint32
	c counters
}

// placements lists what r counts under one row: its session and visit
// counts, and with events its pageviews and custom events by the hour. It
// appends to dst[:0].
func (r *run) placements(dst []placement, events bool) []placement {
	if !r.counted() {
		return dst[:0]
	}
	out := dst[:0]
	put := func(h uint32, f int, n int64) {
		for i := range out {
			if out[i].h == h {
				out[i].c[f] += n
				return
			}
		}
		p := placement{h: h}
		p.c[f] = n
		out = append(out, p)
	}
	putVec := func(h uint32, v *counters) {
		for i := range v {
			if v[i] != 0 {
				put(h, i, v[i])
			}
		}
	}
	sess := r.visitVec()
	sh, eh, ah := hourOf(r.start), hourOf(r.end), hourOf(r.alive)
	putVec(eh, &sess)
	put(ah, fVisits, 1)
	lo := sh + 1
	if ah >= maxCrossings && ah-maxCrossings+1 > lo {
		lo = ah - maxCrossings + 1
	}
	for h := lo; h <= ah; h++ {
		put(h|crossingBit, fVisits, 1)
		if h <= eh {
			putVec(h|crossingBit, &sess)
		}
	}
	if events {
		for _, e := range r.evHours {
			if e.pv > 0 {
				put(e.h, fCount, int64(e.pv))
			}
			if e.cu > 0 {
				put(e.h, fEvents, int64(e.cu))
			}
		}
	}
	return out
}

// apply adds sign times the placements to one row.
func (f *folder) apply(ent, dim, val uint32, ps []placement, sign int64) {
	for i := range ps {
		f.d.addVec(ent, dim, val, ps[i].h, &ps[i].c, sign)
	}
}

// diffPlacements is new minus old, hour by hour, appended to dst[:0].
func diffPlacements(dst, old, new []placement) []placement {
	out := append(dst[:0], new...)
	for _, o := range old {
		found := false
		for i := range out {
			if out[i].h == o.h {
				for j := range o.c {
					out[i].c[j] -= o.c[j]
				}
				found = true
				break
			}
		}
		if !found {
			p := placement{h: o.h}
			for j := range o.c {
				p.c[j] = -o.c[j]
			}
			out = append(out, p)
		}
	}
	kept := out[:0]
	for _, p := range out {
		if !p.c.isZero() {
			kept = append(kept, p)
		}
	}
	return kept
}

// runTuple is the id of r's values under the event-scoped visit
// dimensions in f's delta, computed once per run and batch (the values
// take string work: source, channel, a lookup each).
func (f *folder) runTuple(r *run) uint32 {
	d := f.d
	if r.tupEpoch == d.epoch && r.tupStart == r.startID && r.tupReturning == r.returning {
		return r.tup
	}
	vals, _ := r.visitDims()
	var t visitTuple
	for i := range t {
		t[i] = d.val(vals[i])
	}
	r.tup, r.tupEpoch, r.tupStart, r.tupReturning = d.tupleID(&t), d.epoch, r.startID, r.returning
	return r.tup
}

// sessionDims are the visit dimensions outside the tuple: a run's entry
// and exit page, when it has a pageview.
func (f *folder) sessionDims(r *run) (entry, exit uint32, ok bool) {
	if r.pageviews == 0 {
		return 0, 0, false
	}
	return f.d.val(r.entry), f.d.val(r.exit), true
}

// contribute adds sign times what r counts to every row it counts under.
func (f *folder) contribute(ent uint32, r *run, sign int64) {
	if !r.counted() {
		return
	}
	d := f.d
	plain, withEvents := r.placements(f.pl[6], false), r.placements(f.pl[7], true)
	f.pl[6], f.pl[7] = plain, withEvents
	f.apply(ent, dimTotal, d.val(""), plain, sign)
	f.apply(ent, tupleDim, f.runTuple(r), withEvents, sign)
	if entry, exit, ok := f.sessionDims(r); ok {
		f.apply(ent, dimEntryPage, entry, plain, sign)
		f.apply(ent, dimExitPage, exit, plain, sign)
	}
}

// change moves the rows from what the joined visits counted to what merged
// counts (see the top of this file).
func (f *folder) change(ent uint32, joined []run, merged *run) {
	if len(joined) != 1 || !joined[0].counted() {
		for i := range joined {
			f.contribute(ent, &joined[i], -1)
		}
		f.contribute(ent, merged, 1)
		if len(joined) > 1 {
			merged.marks = f.mergeMarks(ent, joined)
		}
		return
	}
	old := &joined[0]
	d := f.d
	pl := &f.pl
	op, np := old.placements(pl[0], false), merged.placements(pl[1], false)
	oe, ne := old.placements(pl[2], true), merged.placements(pl[3], true)
	dp, de := diffPlacements(pl[4], op, np), diffPlacements(pl[5], oe, ne)
	pl[0], pl[1], pl[2], pl[3], pl[4], pl[5] = op, np, oe, ne, dp, de
	f.apply(ent, dimTotal, d.val(""), dp, 1)
	f.move(ent, tupleDim, f.runTuple(old), f.runTuple(merged), true, true, oe, ne, de)
	oEntry, oExit, oOK := f.sessionDims(old)
	nEntry, nExit, nOK := f.sessionDims(merged)
	f.move(ent, dimEntryPage, oEntry, nEntry, oOK, nOK, op, np, dp)
	f.move(ent, dimExitPage, oExit, nExit, oOK, nOK, op, np, dp)
}

// move takes a row's count from what old counted (o, under value ov) to
// what new counts (n, under nv): by the difference when the value stays.
func (f *folder) move(ent, dim, ov, nv uint32, oOK, nOK bool, o, n, diff []placement) {
	if oOK && nOK && ov == nv {
		f.apply(ent, dim, nv, diff, 1)
		return
	}
	if oOK {
		f.apply(ent, dim, ov, o, -1)
	}
	if nOK {
		f.apply(ent, dim, nv, n, 1)
	}
}

// freshness says what an event changed about its visit's visitor under
// the visit dimensions.
type freshness uint8

const (
	freshNone   freshness = iota // an hour and values already counted
	freshHour                    // the visit's first events in this hour
	freshValues                  // a new visit, merged visits or changed values: every hour again
)

// freshnessOf compares the visit before an event (joined) with after.
func freshnessOf(joined []run, merged *run, h uint32) freshness {
	if len(joined) != 1 || !joined[0].counted() {
		return freshValues
	}
	old := &joined[0]
	if old.startID != merged.startID || old.entryID != merged.entryID || old.returning != merged.returning {
		return freshValues
	}
	for _, e := range old.evHours {
		if e.h == h {
			return freshNone
		}
	}
	return freshHour
}

// visitDimVisitors counts r's visitor under its visit dimensions (exit
// page aside) in each of its event hours within [lo, hi], as Plausible's
// events table carries the session's values on every event: the visitor
// shows under its source or country within the batch, not when the visit
// ends. A sketch cannot take a visitor back, so when a late event changes
// the values (an event earlier than the first, or one that joins two
// visits), the visitor stays under the old ones as well; with events
// arriving in time order per edge that is rare (rollup/DESIGN.md).
func (f *folder) visitDimVisitors(ent uint32, r *run, lo, hi uint32) {
	if !r.counted() {
		return
	}
	d := f.d
	tup := f.runTuple(r)
	entry, _, hasEntry := f.sessionDims(r)
	for _, e := range r.evHours {
		if e.h >= lo && e.h <= hi {
			d.visitorAt(ent, tupleDim, tup, e.h, r.hash)
			if hasEntry {
				d.visitorAt(ent, dimEntryPage, entry, e.h, r.hash)
			}
		}
	}
}

// closeRun marks an ended visit closed and counts its visitor under its
// exit page, in every hour the visit spans (the sessions table's
// uniq(user_id) by exit page): only then is the exit page final, as it
// changes with every pageview.
func (f *folder) closeRun(ent uint32, r *run) {
	if r.closed || r.isLink() {
		return
	}
	r.closed = true
	if !r.counted() || r.pageviews == 0 {
		return
	}
	sh, eh := hourOf(r.start), hourOf(r.end)
	if eh-sh >= maxCrossings {
		sh = eh - maxCrossings + 1
	}
	v := f.d.val(r.exit)
	for h := sh; h <= eh; h++ {
		f.d.visitorAt(ent, dimExitPage, v, h, r.hash)
	}
}
