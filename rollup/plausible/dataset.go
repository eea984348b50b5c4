package plausible

import "slices"

// row is one stored event, compacted: strings interned, visit attributes
// shared with the visitor's previous event when unchanged.
type row struct {
	t           int64 // Unix ms
	visitor     int32
	attrs       int32
	path        int32
	host        int32
	name        int32 // "pageview", "engagement" or the custom name
	props       int32 // first prop in dataset.props
	sess        int32 // -1: an engagement without a live visit, dropped
	nprops      uint16
	engaged     uint32
	kind        Kind
	sd          uint8
	interactive bool
}

func (r *row) sec() int64 { return floorDiv(r.t, 1000) }

// attrs are the visit attributes an event carries; a visit takes those of
// its first event.
type attrs struct {
	referrerHost, utmSource, utmMedium, utmCampaign, utmTerm, utmContent string
	country, region, city                                                string
	device, browser, browserVersion, os, osVersion                       string
}

func sameAttrs(a *attrs, e *Event) bool {
	return a.referrerHost == e.ReferrerHost && a.utmSource == e.UTMSource && a.utmMedium == e.UTMMedium &&
		a.utmCampaign == e.UTMCampaign && a.utmTerm == e.UTMTerm && a.utmContent == e.UTMContent &&
		a.country == e.Country && a.region == e.Region && a.city == e.City && a.device == e.Device &&
		a.browser == e.Browser && a.browserVersion == e.BrowserVersion && a.os == e.OS && a.osVersion == e.OSVersion
}

func attrsOf(e *Event) attrs {
	return attrs{
		referrerHost: e.ReferrerHost, utmSource: e.UTMSource, utmMedium: e.UTMMedium,
		utmCampaign: e.UTMCampaign, utmTerm: e.UTMTerm, utmContent: e.UTMContent,
		country: e.Country, region: e.Region, city: e.City, device: e.Device,
		browser: e.Browser, browserVersion: e.BrowserVersion, os: e.OS, osVersion: e.OSVersion,
	}
}

// attrTable stores attrs in fixed chunks: appending never copies (the
// records hold pointers, so a copy would also run write barriers).
type attrTable struct {
	chunks [][]attrs
	n      int32
}

const attrChunkBits = 10

func (t *attrTable) push(a attrs) int32 {
	if t.n&(1<<attrChunkBits-1) == 0 {
		t.chunks = append(t.chunks, make([]attrs, 1<<attrChunkBits))
	}
	t.chunks[t.n>>attrChunkBits][t.n&(1<<attrChunkBits-1)] = a
	t.n++
	return t.n - 1
}

func (t *attrTable) at(i int32) *attrs {
	return &t.chunks[i>>attrChunkBits][i&(1<<attrChunkBits-1)]
}

func (t *attrTable) len() int { return int(t.n) }

type propRef struct{ key, value int32 }

type visitor struct {
	hash      uint64
	lastAttrs int32
	count     int32
	lastT     int64
	unsorted  bool
	// After grouping: the visitor's rows and sessions.
	rowStart, rowEnd   int32
	sessStart, sessEnd int32
}

// session is a visit rebuilt from its events (Plausible's sessions_v2 row
// in its final, collapsed state).
type session struct {
	visitor             int32
	attrs               int32
	start, last         int64 // seconds: first event, last non-engagement event
	rowStart, rowEnd    int32 // its events (engagements included) in dataset.rows
	entryPath, exitPath int32
	entryHost, exitHost int32
	pageviews           int32
	bounce              bool
	// truncated: the visit began before the scanned window, so its start
	// is unknown (and more than 7 days before the range, see scan.go).
	truncated bool
}

func (s *session) duration() int64 { return s.last - s.start }

// dataset is the site's events of the scanned window, grouped by visitor,
// then by visit, in time order.
type dataset struct {
	strs  *interner
	rows  []row   // grouped by group()
	added [][]row // rows read since the last group(), in fixed-size chunks
	attrs attrTable
	props []propRef

	visitors []visitor
	byHash   visitorTable
	sessions []session

	pageviewID, engagementID int32
	lastHost                 string // a one-entry cache: most events share it
	lastHostID               int32
	// keep, when set, admits only the events of these visitors (the
	// extension scans of scan.go).
	keep map[uint64]bool
	seen int // events delivered, kept or not
}

const rowChunk = 1 << 16

func newDataset() *dataset {
	d := &dataset{strs: newInterner()}
	d.byHash.init(1 << 12)
	d.pageviewID = d.strs.id("pageview")
	d.engagementID = d.strs.id("engagement")
	return d
}

// grow2 appends by doubling, so a long scan leaves half the garbage
// append's 1.25x growth does.
func grow2[T any](s []T, v T) []T {
	if len(s) == cap(s) {
		n := make([]T, len(s), max(2*cap(s), 1024))
		copy(n, s)
		s = n
	}
	return append(s, v)
}

func (d *dataset) add(e *Event) {
	d.seen++
	if d.keep != nil && !d.keep[e.Hash] {
		return
	}
	vi, ok := d.byHash.find(e.Hash)
	if !ok {
		vi = int32(len(d.visitors))
		d.byHash.insert(e.Hash, vi)
		d.visitors = grow2(d.visitors, visitor{hash: e.Hash, lastAttrs: -1})
	}
	v := &d.visitors[vi]
	if v.lastAttrs < 0 || !sameAttrs(d.attrs.at(v.lastAttrs), e) {
		v.lastAttrs = d.attrs.push(attrsOf(e))
	}
	if v.count > 0 && e.Time < v.lastT {
		v.unsorted = true
	}
	v.count++
	v.lastT = e.Time
	if e.Hostname != d.lastHost || d.lastHostID == 0 {
		d.lastHost, d.lastHostID = e.Hostname, d.strs.id(e.Hostname)
	}
	r := row{
		t: e.Time, visitor: vi, attrs: v.lastAttrs, kind: e.Kind, sd: e.ScrollDepth,
		interactive: e.Interactive, engaged: e.EngagedMS,
		path: d.strs.id(e.Path), host: d.lastHostID, sess: -1,
	}
	switch e.Kind {
	case Pageview:
		r.name = d.pageviewID
	case Engagement:
		r.name = d.engagementID
	default:
		r.name = d.strs.id(e.Name)
	}
	if len(e.Props) > 0 {
		r.props = int32(len(d.props))
		n := min(len(e.Props), 1<<16-1)
		r.nprops = uint16(n)
		for _, p := range e.Props[:n] {
			d.props = append(d.props, propRef{key: d.strs.id(p.Key), value: d.strs.id(p.Value)})
		}
	}
	if len(d.added) == 0 || len(d.added[len(d.added)-1]) == cap(d.added[len(d.added)-1]) {
		size := 256 << len(d.added) // small queries stay small
		if len(d.added) >= 8 {
			size = rowChunk
		}
		d.added = append(d.added, make([]row, 0, size))
	}
	last := &d.added[len(d.added)-1]
	*last = append(*last, r)
}

// visitorTable maps visitor hashes to indices: open addressing with
// linear probing, at most half full.
type visitorTable struct {
	slots []visitorSlot
	n     int
	shift uint
}

type visitorSlot struct {
	hash uint64
	vi   int32 // index+1; 0 is empty
}

func (t *visitorTable) init(size int) {
	t.slots = make([]visitorSlot, size)
	t.shift = 64
	for s := size; s > 1; s >>= 1 {
		t.shift--
	}
}

func (t *visitorTable) home(h uint64) int {
	return int((h * 0x9E3779B97F4A7C15) >> t.shift) // Fibonacci hashing: test hashes are small integers
}

func (t *visitorTable) find(h uint64) (int32, bool) {
	mask := len(t.slots) - 1
	for i := t.home(h); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.vi == 0 {
			return 0, false
		}
		if s.hash == h {
			return s.vi - 1, true
		}
	}
}

func (t *visitorTable) insert(h uint64, vi int32) {
	if 2*(t.n+1) > len(t.slots) {
		old := t.slots
		t.init(2 * len(old))
		for _, s := range old {
			if s.vi != 0 {
				t.place(s)
			}
		}
	}
	t.place(visitorSlot{hash: h, vi: vi + 1})
	t.n++
}

func (t *visitorTable) place(s visitorSlot) {
	mask := len(t.slots) - 1
	i := t.home(s.hash)
	for t.slots[i].vi != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = s
}

// group orders the rows by visitor, then time (ties keep arrival order),
// and records each visitor's span.
func (d *dataset) group() {
	offsets := make([]int32, len(d.visitors))
	var n int32
	for i := range d.visitors {
		offsets[i] = n
		n += d.visitors[i].count
	}
	sorted := make([]row, n)
	next := offsets
	place := func(rows []row) {
		for i := range rows {
			vi := rows[i].visitor
			sorted[next[vi]] = rows[i]
			next[vi]++
		}
	}
	place(d.rows)
	for _, c := range d.added {
		place(c)
	}
	d.rows, d.added = sorted, nil
	var start int32
	for i := range d.visitors {
		v := &d.visitors[i]
		v.rowStart, v.rowEnd = start, start+v.count
		start = v.rowEnd
		if v.unsorted {
			slices.SortStableFunc(d.rows[v.rowStart:v.rowEnd], func(a, b row) int {
				switch {
				case a.t < b.t:
					return -1
				case a.t > b.t:
					return 1
				}
				return 0
			})
			v.unsorted = false
		}
		if v.count > 0 {
			v.lastT = d.rows[v.rowEnd-1].t
		}
	}
}

// sessionGap is the longest pause that continues a visit: 30 minutes from
// the last activity, engagement refreshes included (session/cache_store.ex).
const sessionGap = 30 * 60

// sessionize rebuilds the visits of every visitor as Plausible's session
// cache builds them event by event (session/cache_store.ex).
func (d *dataset) sessionize() {
	d.sessions = make([]session, 0, len(d.visitors)+len(d.visitors)/2)
	for vi := range d.visitors {
		v := &d.visitors[vi]
		v.sessStart = int32(len(d.sessions))
		cur := -1
		var lastActivity int64
		for ri := v.rowStart; ri < v.rowEnd; ri++ {
			r := &d.rows[ri]
			sec := r.sec()
			if cur >= 0 && sec-lastActivity > sessionGap {
				cur = -1
			}
			if r.kind == Engagement {
				// Never starts a visit; keeps a live one alive.
				if cur >= 0 {
					r.sess = int32(cur)
					lastActivity = sec
					d.sessions[cur].rowEnd = ri + 1
				}
				continue
			}
			pageview := r.kind == Pageview
			if cur < 0 {
				cur = len(d.sessions)
				s := session{
					visitor: int32(vi), attrs: r.attrs, start: sec, last: sec,
					rowStart: ri, rowEnd: ri + 1,
					bounce: pageview || !r.interactive,
				}
				if pageview {
					s.entryPath, s.exitPath, s.entryHost, s.exitHost = r.path, r.path, r.host, r.host
					s.pageviews = 1
				}
				d.sessions = append(d.sessions, s)
			} else {
				s := &d.sessions[cur]
				if pageview {
					s.pageviews++
					if s.entryPath == 0 {
						s.entryPath = r.path
					}
					if s.entryHost == 0 {
						s.entryHost = r.host
					}
					s.exitPath, s.exitHost = r.path, r.host
				}
				if s.bounce {
					s.bounce = !(s.pageviews >= 2 || (r.interactive && !pageview))
				}
				s.last = sec
				s.rowEnd = ri + 1
			}
			r.sess = int32(cur)
			lastActivity = sec
		}
		v.sessEnd = int32(len(d.sessions))
	}
}
