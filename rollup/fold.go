package rollup

import (
	"strconv"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/store"
)

// stateSource gives the folder the state of a visitor: the live table
// (memory first, then the stored V rows) for apply, a fresh map for a
// rebuild.
type stateSource interface {
	state(k visitorKey) (*visitorState, error)
	siteID(site string) uint32
	intern(s string) string
	// crossed records that events of hash count under r's id.
	crossed(site uint32, hash uint64, r *run)
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
		d.countAndVisitor(cellKey{ent, uint32(dv.dim), d.val(dv.value), h}, fCount, ev.VisitorHash)
	}
	if ev.Flags&ingest.FlagRules != 0 {
		d.countAndVisitor(cellKey{ent, dimRule, d.val(ruleValues[ev.Rule%uint8(len(ruleValues))]), h}, fCount, ev.VisitorHash)
	}
}

// ruleValues are dimRule's values by Event.Rule, made once.
var ruleValues = func() (v [store.MaxRules + 1]string) {
	for i := range v {
		v[i] = strconv.Itoa(i)
	}
	return v
}()

func (f *folder) foldSite(ev *ingest.Event) (uint64, error) {
	d, t := f.d, ev.Time
	ent := d.ent(kindSite, ev.SiteID)
	total := d.val("")
	if ev.Bot() {
		d.add(ent, dimTotal, total, t, fBots, 1)
		return ev.VisitorHash, nil
	}
	r, fresh, err := f.joinVisit(ent, ev)
	if err != nil || r == nil {
		return ev.VisitorHash, err // r == nil: an engagement without a visit, which Plausible drops
	}
	h, hash := hourOf(t), r.hash
	switch fresh {
	case freshHour:
		f.visitDimVisitors(ent, r, h, h)
	case freshValues:
		f.visitDimVisitors(ent, r, 0, ^uint32(0))
	}
	switch ev.Kind {
	case ingest.KindPageview:
		d.countAndVisitor(cellKey{ent, dimTotal, total, h}, fCount, hash)
		d.countAndVisitor(cellKey{ent, dimPage, d.val(ev.Path), h}, fCount, hash)
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
		d.countAndVisitor(cellKey{ent, dimTotal, total, h}, fEvents, hash)
		d.countAndVisitor(cellKey{ent, dimEventName, d.val(ev.Name), h}, fEvents, hash)
		f.markEvent(ent, r, dimCode(dimEventName), ev.Name, h)
		f.foldProps(ent, r, ev, fEvents, h)
	}
	return hash, nil
}

// foldProps counts the event under each of its custom properties.
func (f *folder) foldProps(ent uint32, r *run, ev *ingest.Event, field int, h uint32) {
	d := f.d
	for i := range ev.Props {
		p := &ev.Props[i]
		dim := d.propDim(p.Key)
		d.countAndVisitor(cellKey{ent, dim, d.val(p.Value), h}, field, r.hash)
		f.markEvent(ent, r, d.vals.strs[dim-propDimBase], p.Value, h)
	}
}

// joinVisit puts ev into its visitor's visits: every visit within the gap
// of it joins it, and the rows move from what the joined visits counted to
// what the merged visit counts. It returns the merged visit, or nil for an
// engagement event that joins none, and what is new about its visitor
// under its visit dimensions.
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
func (f *folder) joinVisit(ent uint32, ev *ingest.Event) (*run, freshness, error) {
	t := ev.Time
	site := f.src.siteID(ev.SiteID)
	hday := uint32(dayOf(t))
	home, err := f.src.state(visitorKey{site, hday, ev.VisitorHash})
	if err != nil {
		return nil, 0, err
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
			return nil, 0, err
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
				return nil, 0, err
			}
			before := len(joined)
			if joined = f.takeJoining(ns, t, &merged, joined, engagement); len(joined) > before {
				target = ns
			}
		}
	}
	if engagement && len(joined) == 0 {
		return nil, 0, nil
	}
	if ps != nil {
		ps.link(ev.VisitorHash, t)
	}
	merged.alive = max(merged.alive, t)
	if engagement {
		merged.evHours = addEvHour(merged.evHours, hourOf(t), 0, 0)
	}
	merged.returning = hasEarlierVisit(target, merged.start)
	fresh := freshnessOf(joined, &merged, hourOf(t))
	f.change(ent, joined, &merged)
	f.markReturning(ent, target, merged.start)
	i := insertRun(target, merged)
	target.lastMS = max(target.lastMS, merged.alive)
	target.dirty = true
	// The raw engine counts a stored event under its visit's id: every
	// hash of the visit other than its first event's maps to that id,
	// including the hash of a part that arrived first and has just been
	// joined by an earlier event of the day before.
	if merged.hash != ev.VisitorHash {
		f.src.crossed(site, ev.VisitorHash, &merged)
	}
	for i := range joined {
		if h := joined[i].hash; h != merged.hash && h != ev.VisitorHash {
			f.src.crossed(site, h, &merged)
		}
	}
	return &target.runs[i], fresh, nil
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
		f.visitDimVisitors(ent, r, 0, ^uint32(0))
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
