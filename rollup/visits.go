package rollup

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/waymark/waymark/ingest"
)

// visitGapMS is the inactivity gap that ends a visit.
const visitGapMS = 30 * 60 * 1000

// run is one visit of one visitor, summarised: every field is a function
// of the set of events in it (firsts and lasts break ties by event id), so
// the same events give the same visit in whatever order they arrive.
type run struct {
	start   int64
	startID [16]byte
	end     int64
	attrs   visitAttrs // of the first event

	entryT  int64 // first pageview; entry is its path
	entryID [16]byte
	entry   string
	exitT   int64 // last pageview; exit is its path
	exitID  [16]byte
	exit    string

	pageviews, customs uint32

	// next, when not 0, makes this entry a link rather than a visit: the
	// visitor continued under hash next after midnight UTC (an event
	// carried this visitor's hash as its PrevVisitorHash). end is the
	// latest such event, so the link is pruned like a visit; the other
	// fields are unused.
	next uint64
}

// isLink reports whether r is a link to the next day's hash, not a visit.
func (r *run) isLink() bool { return r.next != 0 }

// visitAttrs are taken from a visit's first event.
type visitAttrs struct {
	referrer, utmSource, utmMedium, utmCampaign, utmTerm, utmContent string
	country, device, browser, os                                     string
}

func (v *visitAttrs) fields() [10]*string {
	return [10]*string{&v.referrer, &v.utmSource, &v.utmMedium, &v.utmCampaign, &v.utmTerm,
		&v.utmContent, &v.country, &v.device, &v.browser, &v.os}
}

// source is the visit's source: utm_source when set, else the referrer
// host without "www.", else "" (direct).
func (v *visitAttrs) source() string {
	if v.utmSource != "" {
		return v.utmSource
	}
	return strings.TrimPrefix(v.referrer, "www.")
}

func before(t1 int64, id1 *[16]byte, t2 int64, id2 *[16]byte) bool {
	if t1 != t2 {
		return t1 < t2
	}
	return bytes.Compare(id1[:], id2[:]) < 0
}

func runOf(ev *ingest.Event) run {
	r := run{start: ev.Time, startID: ev.ID, end: ev.Time, attrs: visitAttrs{
		referrer: ev.ReferrerHost, utmSource: ev.UTMSource, utmMedium: ev.UTMMedium,
		utmCampaign: ev.UTMCampaign, utmTerm: ev.UTMTerm, utmContent: ev.UTMContent,
		country: ev.Country, device: ev.Device, browser: ev.Browser, os: ev.OS,
	}}
	switch ev.Kind {
	case ingest.KindPageview:
		r.pageviews = 1
		r.entryT, r.entryID, r.entry = ev.Time, ev.ID, ev.Path
		r.exitT, r.exitID, r.exit = ev.Time, ev.ID, ev.Path
	case ingest.KindCustom:
		r.customs = 1
	}
	return r
}

// merge combines two runs into one visit.
func merge(a, b run) run {
	out := a
	if before(b.start, &b.startID, a.start, &a.startID) {
		out.start, out.startID, out.attrs = b.start, b.startID, b.attrs
	}
	out.end = max(a.end, b.end)
	if b.pageviews > 0 && (a.pageviews == 0 || before(b.entryT, &b.entryID, a.entryT, &a.entryID)) {
		out.entryT, out.entryID, out.entry = b.entryT, b.entryID, b.entry
	}
	if b.pageviews > 0 && (a.pageviews == 0 || before(a.exitT, &a.exitID, b.exitT, &b.exitID)) {
		out.exitT, out.exitID, out.exit = b.exitT, b.exitID, b.exit
	}
	out.pageviews = a.pageviews + b.pageviews
	out.customs = a.customs + b.customs
	return out
}

// counted reports whether the run is a visit: engagement events alone
// (a tab hidden long after its last pageview) make none.
func (r *run) counted() bool { return r.pageviews+r.customs > 0 }

// visitDims are the dimensions a visit is counted under, with its values.
func (r *run) visitDims() [13]struct {
	dim   byte
	value string
} {
	a := &r.attrs
	type dv = struct {
		dim   byte
		value string
	}
	return [13]dv{
		{dimTotal, ""}, {dimReferrer, a.referrer}, {dimSource, a.source()},
		{dimUTMSource, a.utmSource}, {dimUTMMedium, a.utmMedium}, {dimUTMCampaign, a.utmCampaign},
		{dimUTMTerm, a.utmTerm}, {dimUTMContent, a.utmContent},
		{dimCountry, a.country}, {dimDevice, a.device}, {dimBrowser, a.browser}, {dimOS, a.os},
		{dimEntryPage, r.entry},
	}
}

// contribute adds (sign 1) or takes back (sign -1) what the visit counts:
// one visit in the hour it started, under each of its dimensions.
func (r *run) contribute(d *delta, site string, sign int64) {
	if !r.counted() {
		return
	}
	bounce := int64(0)
	if r.pageviews == 1 {
		bounce = 1
	}
	pv, dur := int64(r.pageviews), r.end-r.start
	put := func(dim byte, value string) {
		d.add(kindSite, site, dim, value, r.start, fVisits, sign)
		d.add(kindSite, site, dim, value, r.start, fBounces, sign*bounce)
		d.add(kindSite, site, dim, value, r.start, fVisitPV, sign*pv)
		d.add(kindSite, site, dim, value, r.start, fDurationMS, sign*dur)
	}
	dims := r.visitDims()
	for _, dv := range dims {
		if dv.dim == dimEntryPage && r.pageviews == 0 {
			continue
		}
		put(dv.dim, dv.value)
	}
	if r.pageviews > 0 {
		put(dimExitPage, r.exit)
	}
}

// visitorKey names one visitor of one site.
type visitorKey struct {
	site    string
	visitor uint64
}

func appendVisitKey(dst []byte, k visitorKey) []byte {
	dst = append(dst, tabVisit, byte(len(k.site)))
	dst = append(dst, k.site...)
	return binary.BigEndian.AppendUint64(dst, k.visitor)
}

// visitorState is a visitor's recent visits, oldest first, and its links
// to the next day's hash.
type visitorState struct {
	runs  []run
	dirty bool
}

// appendVisitorState encodes the visits, then, only when there are any,
// the links (uvarint count, then next uvarint and end varint each), so a
// state without links is encoded as before links existed.
func appendVisitorState(dst []byte, runs []run) []byte {
	visits := 0
	for i := range runs {
		if !runs[i].isLink() {
			visits++
		}
	}
	dst = binary.AppendUvarint(dst, uint64(visits))
	for i := range runs {
		r := &runs[i]
		if r.isLink() {
			continue
		}
		dst = binary.AppendVarint(dst, r.start)
		dst = append(dst, r.startID[:]...)
		dst = binary.AppendVarint(dst, r.end-r.start)
		for _, f := range r.attrs.fields() {
			dst = appendStr(dst, *f)
		}
		dst = binary.AppendVarint(dst, r.entryT-r.start)
		dst = append(dst, r.entryID[:]...)
		dst = appendStr(dst, r.entry)
		dst = binary.AppendVarint(dst, r.exitT-r.start)
		dst = append(dst, r.exitID[:]...)
		dst = appendStr(dst, r.exit)
		dst = binary.AppendUvarint(dst, uint64(r.pageviews))
		dst = binary.AppendUvarint(dst, uint64(r.customs))
	}
	if links := len(runs) - visits; links > 0 {
		dst = binary.AppendUvarint(dst, uint64(links))
		for i := range runs {
			if r := &runs[i]; r.isLink() {
				dst = binary.AppendUvarint(dst, r.next)
				dst = binary.AppendVarint(dst, r.end)
			}
		}
	}
	return dst
}

func appendStr(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

// byteReader reads what appendVisitorState wrote; the first failure sticks.
type byteReader struct {
	b   []byte
	bad bool
}

func (r *byteReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad, r.b = true, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *byteReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.bad, r.b = true, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *byteReader) id(dst *[16]byte) {
	if len(r.b) < 16 {
		r.bad, r.b = true, nil
		return
	}
	copy(dst[:], r.b)
	r.b = r.b[16:]
}

func (r *byteReader) str() string {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.bad, r.b = true, nil
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func decodeVisitorState(b []byte) ([]run, error) {
	r := byteReader{b: b}
	n := r.uvarint()
	if n > 1<<16 {
		return nil, errors.New("cannot decode visitor state: too many visits")
	}
	runs := make([]run, 0, n)
	for range n {
		var v run
		v.start = r.varint()
		r.id(&v.startID)
		v.end = v.start + r.varint()
		for _, f := range v.attrs.fields() {
			*f = r.str()
		}
		v.entryT = v.start + r.varint()
		r.id(&v.entryID)
		v.entry = r.str()
		v.exitT = v.start + r.varint()
		r.id(&v.exitID)
		v.exit = r.str()
		v.pageviews = uint32(r.uvarint())
		v.customs = uint32(r.uvarint())
		runs = append(runs, v)
	}
	if len(r.b) > 0 && !r.bad {
		links := r.uvarint()
		if links == 0 || links > 1<<16 {
			return nil, errors.New("cannot decode visitor state: bad link count")
		}
		for range links {
			next := r.uvarint()
			end := r.varint()
			if next == 0 {
				r.bad = true
			}
			runs = append(runs, run{start: end, end: end, next: next})
		}
	}
	if r.bad || len(r.b) != 0 {
		return nil, errors.New("cannot decode visitor state: malformed")
	}
	return runs, nil
}

// folder turns events into rollup deltas and visit changes. apply uses
// one per request over the stored visitor states; Rebuild uses one per day
// over fresh states.
type folder struct {
	d        *delta
	visitors map[visitorKey]*visitorState
	// load reads a stored visitor state; nil means start empty.
	load func(visitorKey) ([]run, error)
}

func newFolder(load func(visitorKey) ([]run, error)) *folder {
	return &folder{d: newDelta(), visitors: make(map[visitorKey]*visitorState), load: load}
}

// fold adds one event (already known to be new and inside the late
// window) to the rollups.
func (f *folder) fold(ev *ingest.Event) error {
	if ev.Kind == ingest.KindClick {
		f.foldClick(ev)
		return nil
	}
	if ev.SiteID == "" {
		return nil
	}
	return f.foldSite(ev)
}

func (f *folder) foldClick(ev *ingest.Event) {
	d, code, t := f.d, ev.Code, ev.Time
	if code == "" {
		return
	}
	if ev.Bot() {
		d.add(kindLink, code, dimTotal, "", t, fBots, 1)
		d.addAllTime(kindLink, code, fBots, 1)
		return
	}
	d.addAllTime(kindLink, code, fCount, 1)
	for _, dv := range [...]struct {
		dim   byte
		value string
	}{
		{dimTotal, ""}, {dimCountry, ev.Country}, {dimDevice, ev.Device}, {dimBrowser, ev.Browser},
		{dimOS, ev.OS}, {dimReferrer, ev.ReferrerHost}, {dimUTMSource, ev.UTMSource},
		{dimUTMMedium, ev.UTMMedium}, {dimUTMCampaign, ev.UTMCampaign},
	} {
		d.add(kindLink, code, dv.dim, dv.value, t, fCount, 1)
		d.visitor(kindLink, code, dv.dim, dv.value, t, ev.VisitorHash)
	}
}

func (f *folder) foldSite(ev *ingest.Event) error {
	d, site, t := f.d, ev.SiteID, ev.Time
	if ev.Bot() {
		d.add(kindSite, site, dimTotal, "", t, fBots, 1)
		return nil
	}
	switch ev.Kind {
	case ingest.KindPageview:
		for _, dim := range [2]byte{dimTotal, dimPage} {
			value := ""
			if dim == dimPage {
				value = ev.Path
			}
			d.add(kindSite, site, dim, value, t, fCount, 1)
			d.visitor(kindSite, site, dim, value, t, ev.VisitorHash)
		}
	case ingest.KindEngagement:
		for _, dim := range [2]byte{dimTotal, dimPage} {
			value := ""
			if dim == dimPage {
				value = ev.Path
			}
			d.add(kindSite, site, dim, value, t, fEngagedMS, int64(ev.EngagedMS))
			d.add(kindSite, site, dim, value, t, fEngagements, 1)
			d.add(kindSite, site, dim, value, t, fScrollSum, int64(ev.ScrollDepth))
		}
	case ingest.KindCustom:
		d.add(kindSite, site, dimTotal, "", t, fEvents, 1)
		d.add(kindSite, site, dimEventName, ev.Name, t, fEvents, 1)
		d.visitor(kindSite, site, dimTotal, "", t, ev.VisitorHash)
		d.visitor(kindSite, site, dimEventName, ev.Name, t, ev.VisitorHash)
	}

	merged, err := f.joinVisit(ev)
	if err != nil {
		return err
	}

	if ev.Kind != ingest.KindEngagement {
		// Visitors under the visit's dimensions: the visit's values as
		// they stand when this event joins it (see DESIGN.md).
		for _, dv := range merged.visitDims() {
			if dv.dim == dimTotal || (dv.dim == dimEntryPage && merged.pageviews == 0) {
				continue
			}
			d.visitor(kindSite, site, dv.dim, dv.value, t, ev.VisitorHash)
		}
		if merged.pageviews > 0 {
			d.visitor(kindSite, site, dimExitPage, merged.exit, t, ev.VisitorHash)
		}
	}
	return nil
}

// joinVisit puts ev into its visitor's visits: every visit within the gap
// of it joins it (retract what each counted, merge, count the merged
// visit), and returns the merged visit.
//
// Across midnight UTC the visitor has two hashes. An event carrying
// PrevVisitorHash also takes the joining visits under that hash, moves the
// merged visit to its own hash and leaves a link there; an event without
// it follows its state's links and takes the joining visits there too,
// the merged visit then living under the linked hash. Any two events of a
// visit that straddle midnight are within the gap, so the later one
// carries the previous hash: whichever arrives first, the second finds the
// first, and the visit is the same in any arrival order.
func (f *folder) joinVisit(ev *ingest.Event) (run, error) {
	site, t := ev.SiteID, ev.Time
	home, err := f.state(visitorKey{site, ev.VisitorHash})
	if err != nil {
		return run{}, err
	}
	merged := runOf(ev)
	f.takeJoining(home, site, t, &merged)
	target := home
	if prev := ev.PrevVisitorHash; prev != 0 && prev != ev.VisitorHash {
		ps, err := f.state(visitorKey{site, prev})
		if err != nil {
			return run{}, err
		}
		f.takeJoining(ps, site, t, &merged)
		ps.link(ev.VisitorHash, t)
	} else {
		var nexts [4]uint64
		links := nexts[:0]
		for i := range home.runs {
			if n := home.runs[i].next; n != 0 && n != ev.VisitorHash {
				links = append(links, n)
			}
		}
		for _, n := range links {
			ns, err := f.state(visitorKey{site, n})
			if err != nil {
				return run{}, err
			}
			if f.takeJoining(ns, site, t, &merged) {
				target = ns
			}
		}
	}
	merged.contribute(f.d, site, 1)
	target.runs = insertRun(target.runs, merged)
	target.dirty = true
	return merged, nil
}

// state returns the visitor state of k, loading it on first use.
func (f *folder) state(k visitorKey) (*visitorState, error) {
	st := f.visitors[k]
	if st != nil {
		return st, nil
	}
	st = new(visitorState)
	if f.load != nil {
		runs, err := f.load(k)
		if err != nil {
			return nil, err
		}
		st.runs = runs
	}
	f.visitors[k] = st
	return st, nil
}

// takeJoining removes from st every visit within the gap of t, retracting
// what it counted and merging it into merged. It reports whether it took
// any.
func (f *folder) takeJoining(st *visitorState, site string, t int64, merged *run) bool {
	kept := st.runs[:0]
	took := false
	for i := range st.runs {
		r := st.runs[i]
		if !r.isLink() && t >= r.start-visitGapMS && t <= r.end+visitGapMS {
			r.contribute(f.d, site, -1)
			*merged = merge(r, *merged)
			took = true
			continue
		}
		kept = append(kept, r)
	}
	st.runs = kept
	if took {
		st.dirty = true
	}
	return took
}

// link records that the visitor continued under hash next at t.
func (st *visitorState) link(next uint64, t int64) {
	st.dirty = true
	for i := range st.runs {
		if r := &st.runs[i]; r.next == next {
			r.end = max(r.end, t)
			return
		}
	}
	st.runs = append(st.runs, run{start: t, end: t, next: next})
}

// insertRun keeps runs ordered by start.
func insertRun(runs []run, r run) []run {
	i := len(runs)
	for i > 0 && runs[i-1].start > r.start {
		i--
	}
	runs = append(runs, run{})
	copy(runs[i+1:], runs[i:])
	runs[i] = r
	return runs
}

// stageVisitors writes every changed visitor state to b, dropping visits
// that ended before pruneBefore: no event inside the late window can join
// them any more.
func (f *folder) stageVisitors(b *pebble.Batch, pruneBefore int64) error {
	var kb, vb []byte
	for k, st := range f.visitors {
		if !st.dirty {
			continue
		}
		kept := st.runs[:0]
		for _, r := range st.runs {
			if r.end >= pruneBefore {
				kept = append(kept, r)
			}
		}
		kb = appendVisitKey(kb[:0], k)
		var err error
		if len(kept) == 0 {
			err = b.Delete(kb, nil)
		} else {
			vb = appendVisitorState(vb[:0], kept)
			err = b.Set(kb, vb, nil)
		}
		if err != nil {
			return fmt.Errorf("cannot stage visitor state: %w", err)
		}
	}
	return nil
}

// preload reads the stored states of keys from db in key order with one
// iterator, so that fold finds them in memory: a request of events from
// thousands of new visitors would otherwise cost one point read each,
// nearly all of them misses. Keys already held are left alone.
func (f *folder) preload(db pebble.Reader, keys []visitorKey) error {
	type keyed struct {
		k   visitorKey
		key []byte
	}
	todo := make([]keyed, 0, len(keys))
	var buf []byte
	for _, k := range keys {
		if _, ok := f.visitors[k]; ok {
			continue
		}
		f.visitors[k] = new(visitorState) // also drops repeats of k
		off := len(buf)
		buf = appendVisitKey(buf, k)
		todo = append(todo, keyed{k, buf[off:len(buf):len(buf)]})
	}
	if len(todo) == 0 {
		return nil
	}
	slices.SortFunc(todo, func(x, y keyed) int { return bytes.Compare(x.key, y.key) })
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{tabVisit}, UpperBound: []byte{tabVisit + 1}})
	if err != nil {
		return fmt.Errorf("cannot read visitor states: %w", err)
	}
	defer it.Close()
	for _, t := range todo {
		if !it.SeekGE(t.key) || !bytes.Equal(it.Key(), t.key) {
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("cannot read visitor state: %w", err)
		}
		runs, err := decodeVisitorState(v)
		if err != nil {
			return err
		}
		f.visitors[t.k].runs = runs
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("cannot read visitor states: %w", err)
	}
	return nil
}

// loadVisitor reads a stored visitor state from db.
func loadVisitor(db pebble.Reader, k visitorKey) ([]run, error) {
	v, closer, err := db.Get(appendVisitKey(nil, k))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read visitor state: %w", err)
	}
	defer closer.Close()
	return decodeVisitorState(v)
}
