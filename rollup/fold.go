package rollup

import (
	"github.com/waymark/waymark/ingest"
)

// stateSource gives the folder the state of a visitor: the live table
// (memory first, then the stored V rows) for apply, a fresh map for a
// rebuild.
type stateSource interface {
	state(k visitorKey) (*visitorState, error)
	siteID(site string) uint32
	intern(s string) string
}

// visitorState is a visitor's recent visits, oldest first, and its links
// to the next day's hash.
type visitorState struct {
	runs []run
	// dirty: changed since it was last written.
	dirty bool
	// stored: a V row exists (or will, once the batch commits).
	stored bool
	// touched: changed in the batch being applied (undone if it fails).
	touched bool
	// lastMS is the latest event time of any run, for closing and
	// eviction.
	lastMS int64
}

// folder turns events into rollup deltas and visit changes. apply uses
// one per request over the live visitor table; Rebuild one per day over
// fresh states.
type folder struct {
	d   *delta
	src stateSource
}

func newFolder(src stateSource) *folder { return &folder{d: newDelta(), src: src} }

// fold adds one new event to the rollups. It returns the visitor id the
// event counts under: its own hash, or for a site event its visit's (which
// differs after midnight UTC, see joinVisit).
func (f *folder) fold(ev *ingest.Event) (uint64, error) {
	if ev.Kind == ingest.KindClick {
		f.foldClick(ev)
		return ev.VisitorHash, nil
	}
	if ev.SiteID == "" {
		return ev.VisitorHash, nil
	}
	return f.foldSite(ev)
}

// linkDimsOf are the dimensions a click counts under, with its values.
func linkDimsOf(ev *ingest.Event) [9]struct {
	dim   byte
	value string
} {
	return [9]struct {
		dim   byte
		value string
	}{
		{dimTotal, ""}, {dimCountry, ev.Country}, {dimDevice, ev.Device}, {dimBrowser, ev.Browser},
		{dimOS, ev.OS}, {dimReferrer, ev.ReferrerHost}, {dimUTMSource, ev.UTMSource},
		{dimUTMMedium, ev.UTMMedium}, {dimUTMCampaign, ev.UTMCampaign},
	}
}

func (f *folder) foldClick(ev *ingest.Event) {
	if ev.Code == "" {
		return
	}
	d, t := f.d, ev.Time
	ent := d.ent(kindLink, ev.Code)
	if ev.Bot() {
		d.add(ent, dimTotal, d.val(""), t, fBots, 1)
		d.addAllTime(ent, fBots, 1)
		return
	}
	d.addAllTime(ent, fCount, 1)
	h := hourOf(t)
	for _, dv := range linkDimsOf(ev) {
		v := d.val(dv.value)
		d.cell(cellKey{ent, uint32(dv.dim), v, h})[fCount]++
		d.visitorAt(ent, uint32(dv.dim), v, h, ev.VisitorHash)
	}
}

func (f *folder) foldSite(ev *ingest.Event) (uint64, error) {
	d, t := f.d, ev.Time
	ent := d.ent(kindSite, ev.SiteID)
	total := d.val("")
	if ev.Bot() {
		d.add(ent, dimTotal, total, t, fBots, 1)
		return ev.VisitorHash, nil
	}
	r, err := f.joinVisit(ent, ev)
	if err != nil || r == nil {
		return ev.VisitorHash, err // r == nil: an engagement without a visit, which Plausible drops
	}
	h, hash := hourOf(t), r.hash
	switch ev.Kind {
	case ingest.KindPageview:
		page := d.val(ev.Path)
		d.cell(cellKey{ent, dimTotal, total, h})[fCount]++
		d.cell(cellKey{ent, dimPage, page, h})[fCount]++
		d.visitorAt(ent, dimTotal, total, h, hash)
		d.visitorAt(ent, dimPage, page, h, hash)
		f.markEvent(ent, r, dimCode(dimPage), ev.Path, h)
		f.foldProps(ent, r, ev, fCount, h)
	case ingest.KindEngagement:
		page := d.val(ev.Path)
		d.cell(cellKey{ent, dimPage, page, h})[fEngagedMS] += int64(ev.EngagedMS)
		d.visitorAt(ent, dimTotal, total, h, hash)
		d.visitorAt(ent, dimPage, page, h, hash)
		d.cell(cellKey{ent, dimTotal, total, h})[fEngagedMS] += int64(ev.EngagedMS)
		f.markEngagement(ent, r, dimCode(dimPage), ev.Path, ev.ScrollDepth, h)
		f.markEngagement(ent, r, dimCode(dimTotal), "", ev.ScrollDepth, h)
	case ingest.KindCustom:
		name := d.val(ev.Name)
		d.cell(cellKey{ent, dimTotal, total, h})[fEvents]++
		d.cell(cellKey{ent, dimEventName, name, h})[fEvents]++
		d.visitorAt(ent, dimTotal, total, h, hash)
		d.visitorAt(ent, dimEventName, name, h, hash)
		f.markEvent(ent, r, dimCode(dimEventName), ev.Name, h)
		f.foldProps(ent, r, ev, fEvents, h)
	}
	f.visitDimVisitors(ent, r, h)
	switch ev.Kind {
	case ingest.KindPageview:
		f.visitDimEvents(ent, r, h, fCount)
	case ingest.KindCustom:
		f.visitDimEvents(ent, r, h, fEvents)
	}
	return hash, nil
}

// visitDimEvents counts a pageview or custom event under the visit's
// values, in its own hour: Plausible counts events by visit dimension
// from the events table, where each event carries its session's values.
// Entry and exit page are session-only dimensions and take no event
// counts.
func (f *folder) visitDimEvents(ent uint32, r *run, h uint32, field int) {
	d := f.d
	vals, _ := r.visitDims()
	for i, dim := range visitDimIDs {
		if dim != dimEntryPage && dim != dimExitPage {
			d.cell(cellKey{ent, uint32(dim), d.val(vals[i]), h})[field]++
		}
	}
}

// foldProps counts the event under each of its custom properties.
func (f *folder) foldProps(ent uint32, r *run, ev *ingest.Event, field int, h uint32) {
	d := f.d
	for i := range ev.Props {
		p := &ev.Props[i]
		dim, v := d.propDim(p.Key), d.val(p.Value)
		d.cell(cellKey{ent, dim, v, h})[field]++
		d.visitorAt(ent, dim, v, h, r.hash)
		f.markEvent(ent, r, d.vals.strs[dim-propDimBase], p.Value, h)
	}
}

// visitDimVisitors adds the visitor to the rows of the visit's values in
// hour h, once per hour while the values stay.
func (f *folder) visitDimVisitors(ent uint32, r *run, h uint32) {
	if !r.counted() || r.visHour == h {
		return
	}
	r.visHour = h
	d := f.d
	vals, ok := r.visitDims()
	for i, dim := range visitDimIDs {
		if ok[i] && dim != dimExitPage {
			d.visitorAt(ent, uint32(dim), d.val(vals[i]), h, r.hash)
		}
	}
}

// joinVisit puts ev into its visitor's visits: every visit within the gap
// of it joins it, and the rows move from what the joined visits counted to
// what the merged visit counts. It returns the merged visit, or nil for an
// engagement event that joins none.
//
// Across midnight UTC the visitor has two hashes. An event carrying
// PrevVisitorHash also takes the joining visits under that hash, moves the
// merged visit to its own hash and leaves a link there; an event without
// it follows its state's links and takes the joining visits there too,
// the merged visit then living under the linked hash. Any two events of a
// visit that straddle midnight are within the gap, so the later one
// carries the previous hash: whichever arrives first, the second finds the
// first, and the visit is the same in any arrival order. The merged visit
// keeps the hash of its first event as its visitor id.
func (f *folder) joinVisit(ent uint32, ev *ingest.Event) (*run, error) {
	t := ev.Time
	site := f.src.siteID(ev.SiteID)
	hday := uint32(dayOf(t))
	home, err := f.src.state(visitorKey{site, hday, ev.VisitorHash})
	if err != nil {
		return nil, err
	}
	engagement := ev.Kind == ingest.KindEngagement
	var merged run
	if !engagement {
		merged = f.internRun(runOf(ev, ev.VisitorHash))
	}
	var taken [4]run
	joined := f.takeJoining(home, t, &merged, taken[:0], engagement)
	target := home
	var ps *visitorState
	if prev := ev.PrevVisitorHash; prev != 0 && prev != ev.VisitorHash && hday > 0 {
		if ps, err = f.src.state(visitorKey{site, hday - 1, prev}); err != nil {
			return nil, err
		}
		joined = f.takeJoining(ps, t, &merged, joined, engagement)
	} else {
		var nexts [4]uint64
		links := nexts[:0]
		for i := range home.runs {
			if n := home.runs[i].next; n != 0 && n != ev.VisitorHash {
				links = append(links, n)
			}
		}
		for _, n := range links {
			ns, err := f.src.state(visitorKey{site, hday + 1, n})
			if err != nil {
				return nil, err
			}
			before := len(joined)
			if joined = f.takeJoining(ns, t, &merged, joined, engagement); len(joined) > before {
				target = ns
			}
		}
	}
	if engagement && len(joined) == 0 {
		return nil, nil
	}
	if ps != nil {
		ps.link(ev.VisitorHash, t)
	}
	merged.alive = max(merged.alive, t)
	merged.returning = hasEarlierVisit(target, merged.start)
	f.change(ent, joined, &merged)
	f.markReturning(ent, target, merged.start)
	i := insertRun(target, merged)
	target.lastMS = max(target.lastMS, merged.alive)
	target.dirty = true
	return &target.runs[i], nil
}

// hasEarlierVisit reports whether st holds a visit that started before t.
func hasEarlierVisit(st *visitorState, t int64) bool {
	for i := range st.runs {
		if r := &st.runs[i]; !r.isLink() && r.counted() && r.start < t {
			return true
		}
	}
	return false
}

// markReturning makes every visit of st that started after t returning:
// a visit that arrived out of order before them is earlier.
func (f *folder) markReturning(ent uint32, st *visitorState, t int64) {
	for i := range st.runs {
		r := &st.runs[i]
		if r.isLink() || r.returning || r.start <= t {
			continue
		}
		old := *r
		r.returning = true
		f.change(ent, []run{old}, r)
		f.visitDimVisitors(ent, r, hourOf(r.end)) // the visitor under its new value
		st.dirty = true
	}
}

// internRun makes the run's strings the source's own copies, so a state
// kept in memory holds no event buffer.
func (f *folder) internRun(r run) run {
	for _, p := range r.attrs.fields() {
		*p = f.src.intern(*p)
	}
	r.entry, r.exit = f.src.intern(r.entry), f.src.intern(r.exit)
	return r
}

// takeJoining removes from st every visit within the gap of t (from its
// start to its last activity), merging it into merged and appending it to
// joined. For an engagement event merged starts empty and takes the first
// joined visit as it is.
func (f *folder) takeJoining(st *visitorState, t int64, merged *run, joined []run, engagement bool) []run {
	kept := st.runs[:0]
	for i := range st.runs {
		r := st.runs[i]
		if !r.isLink() && t >= r.start-visitGapMS && t <= r.alive+visitGapMS {
			if engagement && len(joined) == 0 {
				*merged = r
			} else {
				*merged = merge(r, *merged)
			}
			joined = append(joined, r)
			continue
		}
		kept = append(kept, r)
	}
	if len(kept) != len(st.runs) {
		st.dirty = true
	}
	st.runs = kept
	return joined
}

// link records that the visitor continued under hash next at t.
func (st *visitorState) link(next uint64, t int64) {
	st.dirty = true
	st.lastMS = max(st.lastMS, t)
	for i := range st.runs {
		if r := &st.runs[i]; r.next == next {
			r.end, r.alive = max(r.end, t), max(r.alive, t)
			return
		}
	}
	st.runs = append(st.runs, run{start: t, end: t, alive: t, next: next})
}

// insertRun keeps the state's runs ordered by start and returns the index
// of r.
func insertRun(st *visitorState, r run) int {
	runs := st.runs
	i := len(runs)
	for i > 0 && runs[i-1].start > r.start {
		i--
	}
	runs = append(runs, run{})
	copy(runs[i+1:], runs[i:])
	runs[i] = r
	st.runs = runs
	return i
}

// change moves the visit rows from what the joined visits counted to what
// merged counts. A visit's numbers are counted in the hour of its last
// event (Plausible buckets a session by its last event), and again in a
// crossing row at every hour boundary it spans, so that an aggregate over
// a range can add the visits still going at its end (Plausible counts a
// session in every range it overlaps). For the common case, one visit
// growing by one event within the same hours, only the differences are
// added; otherwise the old visits are taken back whole and the merged one
// added whole.
func (f *folder) change(ent uint32, joined []run, merged *run) {
	if len(joined) == 1 && joined[0].counted() &&
		hourOf(joined[0].start) == hourOf(merged.start) && hourOf(joined[0].end) == hourOf(merged.end) {
		f.grow(ent, &joined[0], merged)
		return
	}
	for i := range joined {
		f.contribute(ent, &joined[i], -1)
	}
	f.contribute(ent, merged, 1)
	merged.visHour = noHour
	if len(joined) > 1 {
		merged.marks = f.mergeMarks(ent, joined)
	}
}

// maxCrossings bounds the crossing rows of one visit: a visit of more than
// a day counts in aggregates that end within its first day only.
const maxCrossings = 24

// place adds sign times c to a value's row in r's last hour and its
// crossing rows.
func (f *folder) place(ent uint32, r *run, dim, val uint32, c *counters, sign int64) {
	d := f.d
	sh, eh := hourOf(r.start), hourOf(r.end)
	d.addVec(ent, dim, val, eh, c, sign)
	lo := sh + 1
	if eh >= maxCrossings && eh-maxCrossings+1 > lo {
		lo = eh - maxCrossings + 1
	}
	for h := lo; h <= eh; h++ {
		d.addVec(ent, dim, val, h|crossingBit, c, sign)
	}
}

// contribute adds sign times what r counts to every row it counts under.
func (f *folder) contribute(ent uint32, r *run, sign int64) {
	if !r.counted() {
		return
	}
	d := f.d
	c := r.visitVec()
	f.place(ent, r, dimTotal, d.val(""), &c, sign)
	vals, ok := r.visitDims()
	for i, dim := range visitDimIDs {
		if ok[i] {
			f.place(ent, r, uint32(dim), d.val(vals[i]), &c, sign)
		}
	}
}

// grow moves the rows of one visit from old to merged (same start and
// last hours).
func (f *folder) grow(ent uint32, old, merged *run) {
	d := f.d
	oc, nc := old.visitVec(), merged.visitVec()
	var diff counters
	for i := range diff {
		diff[i] = nc[i] - oc[i]
	}
	if !diff.isZero() {
		f.place(ent, merged, dimTotal, d.val(""), &diff, 1)
	}
	ov, oo := old.visitDims()
	nv, no := merged.visitDims()
	for i, dim := range visitDimIDs {
		switch {
		case oo[i] && no[i] && ov[i] == nv[i]:
			if !diff.isZero() {
				f.place(ent, merged, uint32(dim), d.val(nv[i]), &diff, 1)
			}
		default:
			if oo[i] {
				f.place(ent, old, uint32(dim), d.val(ov[i]), &oc, -1)
			}
			if no[i] {
				f.place(ent, merged, uint32(dim), d.val(nv[i]), &nc, 1)
			}
			if dim != dimExitPage {
				merged.visHour = noHour // a value changed: count the visitor under the new one
			}
		}
	}
}

// closeRun counts an ended visit's visitor under its exit page, in every
// hour the visit spans, and marks it closed. Exit pages are counted at the
// end because they change with every pageview, and a sketch cannot take a
// visitor back.
func (f *folder) closeRun(ent uint32, r *run) {
	if r.closed || r.isLink() {
		return
	}
	r.closed = true
	if !r.counted() || r.pageviews == 0 {
		return
	}
	d := f.d
	v := d.val(r.exit)
	sh, eh := hourOf(r.start), hourOf(r.end)
	if eh-sh >= maxCrossings {
		sh = eh - maxCrossings + 1
	}
	for h := sh; h <= eh; h++ {
		d.visitorAt(ent, dimExitPage, v, h, r.hash)
	}
}
