package rollup

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/sources"
)

// visitGapMS is the inactivity gap that ends a visit.
const visitGapMS = 30 * 60 * 1000

// run is one visit of one visitor, summarised as Plausible keeps a
// session: every field is a function of the set of events in it (firsts
// and lasts break ties by event id), so the same events give the same visit
// in whatever order they arrive.
type run struct {
	start   int64 // first event (any kind but engagement)
	startID [16]byte
	// end is the last event that is not an engagement: the visit's
	// duration ends there and its rows are counted in its hour (Plausible
	// buckets a session by its last event).
	end int64
	// alive is the last activity, engagement events included: the next
	// event joins the visit within the gap of it.
	alive int64
	attrs visitAttrs // of the first event
	// hash is the visitor id every event of the visit counts under: the
	// first event's, so a visit that continues past midnight UTC under a
	// new daily hash keeps its old one, as Plausible keeps a session's
	// user_id across its salt rotation.
	hash uint64

	entryT  int64 // first pageview; entry is its path
	entryID [16]byte
	entry   string
	exitT   int64 // last pageview; exit is its path
	exitID  [16]byte
	exit    string

	pageviews, customs uint32
	// interactive counts custom events not sent with "i": false: one of
	// them makes a one-page visit no bounce.
	interactive uint32

	// marks are the event values (pages, event names, properties) the
	// visit has had, for visits and engagement per value (see mark).
	marks []mark
	// evHours are the hours the visit has events in, with its pageviews
	// and custom events there: what it counts under its visit dimensions
	// by the hour (contrib.go), and where its visitor goes when it ends.
	evHours []hourCount

	// closed is set once the visit has been idle past the gap and its exit
	// page has been counted (see closeRun).
	closed bool
	// returning is set when the visitor had an earlier visit the same day
	// (the same daily hash): the seed's new versus returning visitors.
	returning bool

	// tup caches the run's tuple id (delta.tupleID) in the delta of epoch
	// tupEpoch, for the first event tupStart and visitor type
	// tupReturning it was made from; never stored.
	tup, tupEpoch uint32
	tupStart      [16]byte
	tupReturning  bool

	// next, when not 0, makes this entry a link rather than a visit: the
	// visitor continued under hash next after midnight UTC (an event
	// carried this visitor's hash as its PrevVisitorHash). end is the
	// latest such event, so the link is pruned like a visit; the other
	// fields are unused.
	next uint64
}

// mark is one event value a visit has had (marks.go).
type mark struct {
	dim, val string // the value's dimension code and value
	hour     uint32 // the earliest event of the value in the visit
	last     uint32 // the latest
	engaged  bool   // an engagement event on the value (pages)
	engHour  uint32 // the earliest engagement
	maxDepth uint8  // the deepest scroll of those engagements
}

// isLink reports whether r is a link to the next day's hash, not a visit.
func (r *run) isLink() bool { return r.next != 0 }

// visitAttrs are taken from a visit's first event.
type visitAttrs struct {
	referrer, utmSource, utmMedium, utmCampaign, utmTerm, utmContent string
	country, device, browser, os                                     string
	region, city, browserVersion, osVersion                          string
}

// fields lists the attributes in the order the visitor state stores them
// (appendVisitorState, decodeVisitorState).
func (v *visitAttrs) fields() [14]*string {
	return [14]*string{&v.referrer, &v.utmSource, &v.utmMedium, &v.utmCampaign, &v.utmTerm,
		&v.utmContent, &v.country, &v.device, &v.browser, &v.os,
		&v.region, &v.city, &v.browserVersion, &v.osVersion}
}

// source is the visit's source as Plausible names it (rollup/sources):
// utm_source when set, else the referrer's name in the referrer database
// or its host, else "" (direct).
func (v *visitAttrs) source() string { return sources.Source(v.referrer, v.utmSource) }

// channel is the visit's acquisition channel (Plausible's visit:channel).
func (v *visitAttrs) channel() string {
	return sources.Channel(v.source(), sources.UTM{Source: v.utmSource, Medium: v.utmMedium, Campaign: v.utmCampaign}, "")
}

func before(t1 int64, id1 *[16]byte, t2 int64, id2 *[16]byte) bool {
	if t1 != t2 {
		return t1 < t2
	}
	return bytes.Compare(id1[:], id2[:]) < 0
}

// runOf is the visit of one event that is not an engagement.
func runOf(ev *ingest.Event, hash uint64) run {
	r := run{start: ev.Time, startID: ev.ID, end: ev.Time, alive: ev.Time, hash: hash, attrs: visitAttrs{
		referrer: ev.ReferrerHost, utmSource: ev.UTMSource, utmMedium: ev.UTMMedium,
		utmCampaign: ev.UTMCampaign, utmTerm: ev.UTMTerm, utmContent: ev.UTMContent,
		country: ev.Country, device: ev.Device, browser: ev.Browser, os: ev.OS,
		region: ev.Subdivision, city: ev.City, browserVersion: ev.BrowserVersion, osVersion: ev.OSVersion,
	}}
	switch ev.Kind {
	case ingest.KindPageview:
		r.pageviews = 1
		r.entryT, r.entryID, r.entry = ev.Time, ev.ID, ev.Path
		r.exitT, r.exitID, r.exit = ev.Time, ev.ID, ev.Path
		r.evHours = []hourCount{{hourOf(ev.Time), 1, 0}}
	case ingest.KindCustom:
		r.customs = 1
		if ev.Flags&ingest.FlagNonInteractive == 0 {
			r.interactive = 1
		}
		r.evHours = []hourCount{{hourOf(ev.Time), 0, 1}}
	}
	return r
}

// merge combines two runs into one visit.
func merge(a, b run) run {
	out := a
	if before(b.start, &b.startID, a.start, &a.startID) {
		out.start, out.startID, out.attrs, out.hash = b.start, b.startID, b.attrs, b.hash
	}
	out.end = max(a.end, b.end)
	out.alive = max(a.alive, b.alive)
	out.marks = unionMarks(a.marks, b.marks)
	out.evHours = mergeEvHours(a.evHours, b.evHours)
	if b.pageviews > 0 && (a.pageviews == 0 || before(b.entryT, &b.entryID, a.entryT, &a.entryID)) {
		out.entryT, out.entryID, out.entry = b.entryT, b.entryID, b.entry
	}
	if b.pageviews > 0 && (a.pageviews == 0 || before(a.exitT, &a.exitID, b.exitT, &b.exitID)) {
		out.exitT, out.exitID, out.exit = b.exitT, b.exitID, b.exit
	}
	out.pageviews = a.pageviews + b.pageviews
	out.customs = a.customs + b.customs
	out.interactive = a.interactive + b.interactive
	out.closed = a.closed && b.closed
	return out
}

// counted reports whether the run is a visit: it has a pageview or a
// custom event (a visit is never made of engagement events alone).
func (r *run) counted() bool { return r.pageviews+r.customs > 0 }

// bounced: at most one pageview and no interactive custom event
// (Plausible's is_bounce).
func (r *run) bounced() bool { return r.pageviews <= 1 && r.interactive == 0 }

// visitVec is what a visit adds to each row it is counted under.
func (r *run) visitVec() counters {
	var c counters
	if !r.counted() {
		return c
	}
	c[fSessions] = 1
	if r.bounced() {
		c[fBounces] = 1
	}
	c[fVisitPV] = int64(r.pageviews)
	// Plausible keeps event times in whole seconds.
	c[fDurationMS] = (r.end/1000 - r.start/1000) * 1000
	c[fVisitEvents] = int64(r.pageviews + r.customs)
	return c
}

// Visit-scoped dimensions, in the order visitDims lists them.
var visitDimIDs = [...]byte{
	dimReferrer, dimSource, dimChannel, dimUTMSource, dimUTMMedium, dimUTMCampaign, dimUTMTerm, dimUTMContent,
	dimCountry, dimDevice, dimBrowser, dimOS,
	dimRegion, dimCity, dimBrowserVersion, dimOSVersion,
	dimVisitorType, dimEntryPage, dimExitPage, // entry and exit last: see nTupleDims
}

// Values of dimVisitorType.
const (
	visitorNew       = "new"
	visitorReturning = "returning"
)

const nVisitDims = len(visitDimIDs)

// visitDims returns the run's value under each visit dimension; ok is
// false for entry and exit page of a visit without a pageview.
func (r *run) visitDims() (vals [nVisitDims]string, ok [nVisitDims]bool) {
	a := &r.attrs
	src := a.source()
	ch := sources.Channel(src, sources.UTM{Source: a.utmSource, Medium: a.utmMedium, Campaign: a.utmCampaign}, "")
	vt := visitorNew
	if r.returning {
		vt = visitorReturning
	}
	vals = [nVisitDims]string{strings.TrimPrefix(a.referrer, "www."), src, ch, a.utmSource, a.utmMedium, a.utmCampaign,
		a.utmTerm, a.utmContent, a.country, a.device, a.browser, a.os,
		a.region, a.city, a.browserVersion, a.osVersion, vt, r.entry, r.exit}
	for i := range ok {
		ok[i] = true
	}
	if r.pageviews == 0 {
		ok[nVisitDims-2], ok[nVisitDims-1] = false, false
	}
	return vals, ok
}

// visitorKey names one visitor of one site: the hash and the UTC day whose
// salt made it (hashes of different days are different visitors).
type visitorKey struct {
	site uint32 // the aggregator's site id (siteTable)
	day  uint32
	hash uint64
}

// appendVisitKey encodes V day site visitor.
func appendVisitKey(dst []byte, day uint32, site string, hash uint64) []byte {
	dst = append(dst, tabVisit)
	dst = binary.BigEndian.AppendUint32(dst, day)
	dst = append(dst, byte(len(site)))
	dst = append(dst, site...)
	return binary.BigEndian.AppendUint64(dst, hash)
}

// parseVisitKey reads what appendVisitKey wrote.
func parseVisitKey(k []byte) (d uint32, site string, hash uint64, ok bool) {
	if len(k) < 6 || k[0] != tabVisit {
		return 0, "", 0, false
	}
	n := int(k[5])
	if len(k) != 6+n+8 {
		return 0, "", 0, false
	}
	return binary.BigEndian.Uint32(k[1:5]), string(k[6 : 6+n]), binary.BigEndian.Uint64(k[6+n:]), true
}

// Visitor state encoding: uvarint count of visits, each visit, then (only
// when there are any) uvarint count of links, each next uvarint and end
// varint.
// Flags of a visit.
const (
	runClosed    = 1
	runReturning = 2
)

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
		flags := byte(0)
		if r.closed {
			flags |= runClosed
		}
		if r.returning {
			flags |= runReturning
		}
		dst = append(dst, flags)
		dst = binary.AppendVarint(dst, r.start)
		dst = append(dst, r.startID[:]...)
		dst = binary.AppendVarint(dst, r.end-r.start)
		dst = binary.AppendVarint(dst, r.alive-r.start)
		dst = binary.LittleEndian.AppendUint64(dst, r.hash)
		dst = binary.AppendUvarint(dst, uint64(len(r.evHours)))
		for _, e := range r.evHours {
			dst = binary.AppendUvarint(dst, uint64(e.h))
			dst = binary.AppendUvarint(dst, uint64(e.pv))
			dst = binary.AppendUvarint(dst, uint64(e.cu))
		}
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
		dst = binary.AppendUvarint(dst, uint64(r.interactive))
		dst = binary.AppendUvarint(dst, uint64(len(r.marks)))
		for _, m := range r.marks {
			dst = appendStr(dst, m.dim)
			dst = appendStr(dst, m.val)
			dst = binary.AppendUvarint(dst, uint64(m.hour))
			dst = binary.AppendUvarint(dst, uint64(m.last-m.hour))
			e := byte(0)
			if m.engaged {
				e = 1
			}
			dst = append(dst, e, m.maxDepth)
			dst = binary.AppendUvarint(dst, uint64(m.engHour))
		}
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
	// str interns the strings it reads, so a state kept in memory does
	// not hold on to the bytes it was decoded from.
	intern func([]byte) string
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

func (r *byteReader) byte() byte {
	if len(r.b) == 0 {
		r.bad = true
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *byteReader) uint64() uint64 {
	if len(r.b) < 8 {
		r.bad, r.b = true, nil
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *byteReader) uint32() uint32 {
	if len(r.b) < 4 {
		r.bad, r.b = true, nil
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b)
	r.b = r.b[4:]
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
	b := r.b[:n]
	r.b = r.b[n:]
	if r.intern != nil {
		return r.intern(b)
	}
	return string(b)
}

func decodeVisitorState(b []byte, intern func([]byte) string) ([]run, error) {
	r := byteReader{b: b, intern: intern}
	n := r.uvarint()
	if n > 1<<16 {
		return nil, errors.New("cannot decode visitor state: too many visits")
	}
	runs := make([]run, 0, n)
	for range n {
		var v run
		flags := r.byte()
		v.closed = flags&runClosed != 0
		v.returning = flags&runReturning != 0
		v.start = r.varint()
		r.id(&v.startID)
		v.end = v.start + r.varint()
		v.alive = v.start + r.varint()
		v.hash = r.uint64()
		nh := r.uvarint()
		if nh > maxEvHours {
			r.bad, nh = true, 0
		}
		for range nh {
			v.evHours = append(v.evHours, hourCount{uint32(r.uvarint()), uint32(r.uvarint()), uint32(r.uvarint())})
		}
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
		v.interactive = uint32(r.uvarint())
		nm := r.uvarint()
		if nm > maxMarks {
			r.bad = true
			nm = 0
		}
		for range nm {
			m := mark{dim: r.str(), val: r.str(), hour: uint32(r.uvarint())}
			m.last = m.hour + uint32(r.uvarint())
			e, d := r.byte(), r.byte()
			m.engaged, m.maxDepth = e == 1, d
			m.engHour = uint32(r.uvarint())
			if e > 1 || m.dim == "" {
				r.bad = true
			}
			v.marks = append(v.marks, m)
		}
		if flags&^(runClosed|runReturning) != 0 {
			r.bad = true
		}
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
