package clickhouse

import (
	"math"
	"sort"
	"strings"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/sources"
)

// Visits are rebuilt from the raw events at query time (DESIGN.md,
// "Visits"): the events of a window, in time order, are cut into visits by
// the rules of rollup/DESIGN.md ("The numbers Plausible users expect").
// Nothing about a visit is kept between segments, so a visit split over
// segments, aggregators or a restart is the same visit here, and a retried
// segment (read once through FINAL) changes nothing.

// visitGapMS ends a visit after 30 minutes without activity.
const visitGapMS = 30 * 60 * 1000

// visit is one visit of the loaded events.
type visit struct {
	// id is the visitor id its events count under: its first event's
	// hash, kept by the part after midnight UTC under the new day's hash.
	id                   uint64
	start, end, alive    int64 // first event, last non-engagement, last activity
	pv, custom, interact int
	entry, exit          string
	first                int32 // index of the first event
	returning            bool  // an earlier visit under the same daily hash
}

// counted: a visit has a pageview or a custom event.
func (v *visit) counted() bool { return v.pv+v.custom > 0 }

func (v *visit) bounced() bool { return v.pv <= 1 && v.interact == 0 }

// overlaps reports whether the visit is counted by the range [lo, hi).
func (v *visit) overlaps(lo, hi int64) bool { return v.counted() && v.end >= lo && v.start < hi }

// siteData is a window of a site's events cut into visits.
type siteData struct {
	evs    []storedEvent // by time, then id
	of     []int32       // each event's visit, -1 for an engagement without one
	visits []visit
	cur    map[uint64]int32  // a hash's latest visit
	alias  map[uint64]uint64 // a later day's hash -> visit id
}

// sessionize cuts evs (ordered by time, then id) into visits: an event
// joins the visit of its hash when it comes within the gap of the visit's
// last activity; an event of the first 30 minutes of a UTC day also finds
// the visit of its previous day's hash (PrevVisitorHash), and its hash then
// stays an alias of that visit. Engagement events keep a visit alive but
// never start one (without one they are dropped).
func sessionize(evs []storedEvent) *siteData { return sessionizeFrom(nil, evs) }

// sessionizeFrom is sessionize of evs after the visits of seed, carried
// from a midnight before every event of evs (carried.go).
func sessionizeFrom(seed []carriedVisit, evs []storedEvent) *siteData {
	all, carried := seeded(seed, evs)
	evs = all
	d := &siteData{evs: evs, of: make([]int32, len(evs)), cur: make(map[uint64]int32), alias: make(map[uint64]uint64)}
	cur, alias := d.cur, d.alias
	for vi := range seed {
		v := seed[vi].v
		v.first = -1
		d.visits = append(d.visits, v)
		cur[v.id] = int32(vi)
		for _, k := range seed[vi].keys {
			alias[k] = v.id
			cur[k] = int32(vi)
		}
	}
	find := func(h uint64, t int64) int32 {
		if a, ok := alias[h]; ok {
			h = a
		}
		if vi, ok := cur[h]; ok && t-d.visits[vi].alive <= visitGapMS {
			return vi
		}
		return -1
	}
	for i := range evs {
		if carried != nil && carried[i] >= 0 {
			vi := carried[i]
			d.of[i] = vi
			if d.visits[vi].first < 0 {
				d.visits[vi].first = int32(i)
			}
			continue
		}
		ev := &evs[i]
		vi := find(ev.VisitorHash, ev.Time)
		if vi < 0 && ev.PrevVisitorHash != 0 && ev.PrevVisitorHash != ev.VisitorHash {
			if vi = find(ev.PrevVisitorHash, ev.Time); vi >= 0 {
				alias[ev.VisitorHash] = d.visits[vi].id
				// The visit now lives under the new day's hash, where it
				// has no earlier visit: the embedded store makes it new
				// (joinVisit), and a later visit of the day returning.
				d.visits[vi].returning = false
				cur[ev.VisitorHash] = vi
			}
		}
		if ev.Kind == ingest.KindEngagement {
			d.of[i] = vi
			if vi >= 0 {
				v := &d.visits[vi]
				v.alive = max(v.alive, ev.Time)
			}
			continue
		}
		if vi < 0 {
			delete(alias, ev.VisitorHash)
			_, earlier := cur[ev.VisitorHash]
			d.visits = append(d.visits, visit{id: ev.VisitorHash, start: ev.Time, first: int32(i), returning: earlier})
			vi = int32(len(d.visits) - 1)
			cur[ev.VisitorHash] = vi
		}
		d.of[i] = vi
		v := &d.visits[vi]
		v.end, v.alive = ev.Time, max(v.alive, ev.Time)
		switch ev.Kind {
		case ingest.KindPageview:
			if v.pv == 0 {
				v.entry = ev.Path
			}
			v.exit = ev.Path
			v.pv++
		case ingest.KindCustom:
			v.custom++
			if ev.Flags&ingest.FlagNonInteractive == 0 {
				v.interact++
			}
		}
	}
	return d
}

// span returns the indexes [i, j) of the events with lo <= Time < hi.
func (d *siteData) span(lo, hi int64) (int, int) {
	i := sort.Search(len(d.evs), func(k int) bool { return d.evs[k].Time >= lo })
	j := sort.Search(len(d.evs), func(k int) bool { return d.evs[k].Time >= hi })
	return i, j
}

// visitValue is a visit's value under a visit dimension; ok is false for
// entry and exit page of a visit without a pageview.
func (d *siteData) visitValue(v *visit, dim string) (string, bool) {
	e := &d.evs[v.first]
	switch dim {
	case "referrer":
		return strings.TrimPrefix(e.ReferrerHost, "www."), true
	case "source":
		return sources.Source(e.ReferrerHost, e.UTMSource), true
	case "channel":
		src := sources.Source(e.ReferrerHost, e.UTMSource)
		return sources.Channel(src, sources.UTM{Source: e.UTMSource, Medium: e.UTMMedium, Campaign: e.UTMCampaign}, ""), true
	case "utm_source":
		return e.UTMSource, true
	case "utm_medium":
		return e.UTMMedium, true
	case "utm_campaign":
		return e.UTMCampaign, true
	case "utm_term":
		return e.UTMTerm, true
	case "utm_content":
		return e.UTMContent, true
	case "country":
		return e.Country, true
	case "region":
		return e.Subdivision, true
	case "city":
		return e.City, true
	case "device":
		return e.Device, true
	case "browser":
		return e.Browser, true
	case "browser_version":
		return e.BrowserVersion, true
	case "os":
		return e.OS, true
	case "os_version":
		return e.OSVersion, true
	case "visitor_type":
		if v.returning {
			return "returning", true
		}
		return "new", true
	case "entry_page":
		return v.entry, v.pv > 0
	case "exit_page":
		return v.exit, v.pv > 0
	}
	return "", dim == ""
}

// eventScoped dimensions take their value from each event.
func eventScoped(dim string) bool { return dim == "page" || dim == "event" }

// row is what one dimension value (or the whole site, "") counts over a
// range, as the embedded store's rows do.
type row struct {
	visitors                    map[uint64]struct{}
	visits                      int64 // visits counted (overlapping the range), or with such an event for page and event
	sessions                    int64 // the visits bounce, duration and views per visit are over
	bounces, visitPV, durationS int64
	pageviews, events           int64
	engagedMS, engVisits        int64
	scrollSum                   int64
	uniq                        *int64 // visitors counted by ClickHouse (site rows and the open part's ids)
}

func newRow() *row { return &row{visitors: make(map[uint64]struct{})} }

// visitorCount is the row's visitors: counted in ClickHouse when uniq is
// set (site rows), else the ids held.
func (r *row) visitorCount() uint64 {
	if r.uniq != nil {
		return uint64(*r.uniq)
	}
	return uint64(len(r.visitors))
}

// addCounters adds site_rows counters (siterows.go's order) to r.
func (r *row) addCounters(c *[nCounters]int64) {
	r.visits += c[cVisits]
	r.sessions += c[cSessions]
	r.bounces += c[cBounces]
	r.visitPV += c[cVisitPV]
	r.durationS += c[cDuration]
	r.pageviews += c[cPageviews]
	r.events += c[cEvents]
	r.engagedMS += c[cEngagedMS]
	r.engVisits += c[cEngVisits]
	r.scrollSum += c[cScroll]
}

// add sums o into r (a filter matching several values sums their rows,
// visitors as a union).
func (r *row) add(o *row) {
	for h := range o.visitors {
		r.visitors[h] = struct{}{}
	}
	r.visits += o.visits
	r.sessions += o.sessions
	r.bounces += o.bounces
	r.visitPV += o.visitPV
	r.durationS += o.durationS
	r.pageviews += o.pageviews
	r.events += o.events
	r.engagedMS += o.engagedMS
	r.engVisits += o.engVisits
	r.scrollSum += o.scrollSum
}

// rowsBy counts the range [lo, hi) by dimension dim ("" for the whole
// site), one row per value.
func (d *siteData) rowsBy(lo, hi int64, dim string) map[string]*row {
	return d.rowsFrom(lo, hi, dim, math.MinInt64)
}

// rowsFrom is rowsBy over the visits that an event at or after from
// could still join only (the open part of a question answered from site
// rows: those closing at or after its horizon).
func (d *siteData) rowsFrom(lo, hi int64, dim string, from int64) map[string]*row {
	out := make(map[string]*row)
	get := func(k string) *row {
		r := out[k]
		if r == nil {
			r = newRow()
			out[k] = r
		}
		return r
	}
	type engKey struct {
		visit int32
		val   string
	}
	engaged := make(map[engKey]int64) // deepest scroll of a visit's engagements in range
	seen := make(map[engKey]bool)     // visits with a page or event value in range
	for vi := range d.visits {
		v := &d.visits[vi]
		if !v.overlaps(lo, hi) || v.closesBy(from) {
			continue
		}
		key, ok := "", true
		switch {
		case eventScoped(dim):
			ok = false // their rows hold no session metrics, as the embedded store's
		default:
			key, ok = d.visitValue(v, dim)
		}
		if !ok {
			continue
		}
		r := get(key)
		if !eventScoped(dim) {
			r.visits++
		}
		r.sessions++
		if v.bounced() {
			r.bounces++
		}
		r.visitPV += int64(v.pv)
		r.durationS += v.end/1000 - v.start/1000
	}
	i, j := d.span(lo, hi)
	for k := i; k < j; k++ {
		vi := d.of[k]
		if vi < 0 {
			continue
		}
		ev, v := &d.evs[k], &d.visits[vi]
		if v.closesBy(from) {
			continue
		}
		key, ok := "", true
		switch dim {
		case "page":
			key = ev.Path
			ok = ev.Kind != ingest.KindCustom
		case "event":
			key = ev.Name
			ok = ev.Kind == ingest.KindCustom
		case "":
		default:
			key, ok = d.visitValue(v, dim)
		}
		if !ok {
			continue
		}
		r := get(key)
		r.visitors[v.id] = struct{}{}
		if eventScoped(dim) && !seen[engKey{vi, key}] {
			seen[engKey{vi, key}] = true
			r.visits++
		}
		switch ev.Kind {
		case ingest.KindPageview:
			r.pageviews++
			r.events++
		case ingest.KindCustom:
			r.events++
		case ingest.KindEngagement:
			r.engagedMS += int64(ev.EngagedMS)
			ek := engKey{vi, key}
			if dim != "page" && !v.overlaps(lo, hi) {
				continue
			}
			engaged[ek] = max(engaged[ek], int64(ev.ScrollDepth)+1)
		}
	}
	for ek, depth := range engaged {
		r := get(ek.val)
		r.engVisits++
		r.scrollSum += depth - 1
	}
	return out
}
