package rollup

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
	"github.com/waymark/waymark/rollup/sources"
)

// The generated world: one link and one site (in New York) over the three
// days before base, seen from base.
const (
	genCode = "lnk0001"
	genSite = "site-ny"
	genTZ   = "America/New_York"
)

var (
	genCountries = []string{"DE", "US", "FR", "JP", "BR"}
	genDevices   = []string{"desktop", "mobile", "tablet"}
	genBrowsers  = []string{"Firefox", "Chrome", "Safari"}
	genOSes      = []string{"Linux", "Windows", "iOS", "Android"}
	genPages     = []string{"/", "/pricing", "/docs", "/blog/a", "/blog/b", "/signup"}
	genReferrers = []string{"", "", "www.google.com", "news.ycombinator.com", "t.co"}
)

// genWorld is a deterministic stream of events and what the tests know of
// it: which ones arrived past the late window.
type genWorld struct {
	events []ingest.Event
	late   map[[16]byte]bool
}

// genDetail gives visitor v's region, city, browser and OS versions,
// from v alone (the random stream stays as it was): some visitors without
// a region, some with a region and no city, some without versions.
func genDetail(v int, country string) (region, city, browserVersion, osVersion string) {
	if v%5 != 0 {
		region = fmt.Sprintf("%s-%d", country, v%3)
		if v%4 != 0 {
			city = fmt.Sprint(5391959 + v%4)
		}
	}
	if v%7 != 0 {
		browserVersion = fmt.Sprintf("%d.0", 120+v%3)
	}
	if v%3 == 0 {
		osVersion = "17.1"
	}
	return region, city, browserVersion, osVersion
}

// generate makes visitors with multi-page visits, bounces, engagement,
// custom events, bots, visits across midnight UTC, late events (older
// than the 48 h late window at base) and clicks, in a shuffled order
// (edges ship out of order).
func generate(seed uint64) *genWorld {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	w := &genWorld{late: make(map[[16]byte]bool)}
	n := 0
	id := func() [16]byte {
		n++
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], seed)
		binary.BigEndian.PutUint64(b[8:], uint64(n))
		return b
	}
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	start := base.Add(-47 * time.Hour)
	span := int64(47 * time.Hour / time.Millisecond)

	for v := range 300 {
		// A visitor's hash changes with the UTC day, and events of the
		// first half hour of a day also carry yesterday's, as ingest
		// hashes them.
		stamp := func(ev *ingest.Event) {
			d := uint64(dayOf(ev.Time))
			ev.VisitorHash = genHash(v, d)
			ev.PrevVisitorHash = 0
			if ev.Time%msPerDay < visitGapMS {
				ev.PrevVisitorHash = genHash(v, d-1)
			}
		}
		bot := v%20 == 0
		country, device, browser, os := pick(genCountries), pick(genDevices), pick(genBrowsers), pick(genOSes)
		region, city, browserVersion, osVersion := genDetail(v, country)
		visits := 1 + rng.IntN(3)
		t := start.UnixMilli() + rng.Int64N(span)
		if v%25 == 1 {
			// Across midnight UTC: starts at 23:50, goes on past 00:00.
			mid := base.Truncate(24 * time.Hour).Add(-24*time.Hour - 10*time.Minute)
			t = mid.UnixMilli()
			visits = 1
		}
		for range visits {
			ref, utm := pick(genReferrers), ""
			if rng.IntN(4) == 0 {
				utm = "newsletter"
			}
			pages := 1 + rng.IntN(5)
			if v%25 == 1 {
				pages = 4
			}
			for p := range pages {
				ev := ingest.Event{
					Kind: ingest.KindPageview, ID: id(), Time: t, SiteID: genSite, Name: "pageview",
					Path: pick(genPages), ReferrerHost: ref, UTMSource: utm, Country: country, Device: device,
					Browser: browser, OS: os, Node: "edge-1", Region: "eu",
					Subdivision: region, City: city, BrowserVersion: browserVersion, OSVersion: osVersion,
				}
				stamp(&ev)
				if p > 0 {
					ev.ReferrerHost = "" // internal navigation
					ev.UTMSource = ""
				}
				if bot {
					ev.Flags |= ingest.FlagBot
				}
				w.events = append(w.events, ev)
				dwell := int64(5_000 + rng.IntN(8*60_000))
				if rng.IntN(3) > 0 {
					eng := ev
					eng.Kind, eng.Name, eng.ID, eng.Time = ingest.KindEngagement, "engagement", id(), t+dwell
					eng.EngagedMS, eng.ScrollDepth = uint64(dwell*3/4), uint8(rng.IntN(101))
					stamp(&eng)
					w.events = append(w.events, eng)
				}
				if rng.IntN(6) == 0 {
					c := ev
					c.Kind, c.Name, c.ID, c.Time = ingest.KindCustom, "signup", id(), t+dwell/2
					stamp(&c)
					w.events = append(w.events, c)
				}
				t += dwell + 1000
			}
			t += int64(31+rng.IntN(600)) * 60_000 // the next visit
		}
	}
	// Late: a visitor whose events arrive more than 48 h after they
	// happened; stored raw, in no rollup.
	for i := range 5 {
		ev := ingest.Event{
			Kind: ingest.KindPageview, ID: id(), Time: base.Add(-50*time.Hour + time.Duration(i)*time.Minute).UnixMilli(),
			SiteID: genSite, Name: "pageview", Path: "/late", VisitorHash: 77, Node: "edge-2",
		}
		w.late[ev.ID] = true
		w.events = append(w.events, ev)
	}
	// Clicks.
	for i := range 600 {
		ev := ingest.Event{
			Kind: ingest.KindClick, ID: id(), Time: start.UnixMilli() + rng.Int64N(span), Code: genCode,
			Country: pick(genCountries), Device: pick(genDevices), Browser: pick(genBrowsers), OS: pick(genOSes),
			ReferrerHost: pick(genReferrers), VisitorHash: uint64(1 + rng.IntN(250)), Node: "edge-1",
		}
		if i%10 == 0 {
			ev.Flags |= ingest.FlagBot
		}
		if i%7 == 0 {
			ev.UTMSource, ev.UTMCampaign = "mail", "launch"
		}
		w.events = append(w.events, ev)
	}
	rng.Shuffle(len(w.events), func(i, j int) { w.events[i], w.events[j] = w.events[j], w.events[i] })
	// Engagement events reach the aggregator after the pageview they
	// follow (the tracker sends them later, and an edge ships in order);
	// one that arrived first would be dropped, as Plausible drops an
	// engagement without a live session.
	// The late visitor's events arrive together, last: an edge cut off for
	// two days ships its old segments in order when it is back.
	var rest, engagements, late []ingest.Event
	for _, ev := range w.events {
		switch {
		case w.late[ev.ID]:
			late = append(late, ev)
		case ev.Kind == ingest.KindEngagement:
			engagements = append(engagements, ev)
		default:
			rest = append(rest, ev)
		}
	}
	w.events = append(append(rest, engagements...), late...)
	return w
}

// inTimeOrder is the world as a healthy deployment delivers it: events in
// time order (each edge ships its segments in order, and the aggregator
// interleaves the edges' batches), the late visitor's events still last.
func (w *genWorld) inTimeOrder() *genWorld {
	out := &genWorld{late: w.late}
	var late []ingest.Event
	for _, ev := range w.events {
		if w.late[ev.ID] {
			late = append(late, ev)
			continue
		}
		out.events = append(out.events, ev)
	}
	slices.SortStableFunc(out.events, func(x, y ingest.Event) int { return cmp.Compare(x.Time, y.Time) })
	out.events = append(out.events, late...)
	return out
}

// genHash is visitor v's hash on UTC day d.
func genHash(v int, d uint64) uint64 { return mix64(uint64(v+1)<<24 | d) }

// segments cuts the stream into sealed segments of per events.
func (w *genWorld) segments(node string, per int) [][]byte {
	var out [][]byte
	for i, seq := 0, uint64(1); i < len(w.events); i, seq = i+per, seq+1 {
		out = append(out, segmentBytes(node, seq, w.events[i:min(i+per, len(w.events))]...))
	}
	return out
}

// refSite is the plain reference: every site metric over [from, to),
// computed from the raw events with no rollups, by Plausible's
// definitions (rollup/DESIGN.md): sessions end after 30 minutes without
// activity (engagement events keep one alive but never start one); a
// session counts in a range it overlaps; bounce is at most one pageview
// and no interactive custom event; duration runs to the last event that is
// not an engagement; pageviews, events and visitors are the events' own.
type refSite struct {
	visitors, visits, pageviews, bounces, visitPV, durationMS int64
	events, engagedMS, engagedVisits, scrollSum, bots         int64
	pagePV                                                    map[string]int64
	pageVisitors                                              map[string]map[uint64]bool
	countryVisit                                              map[string]int64
	entryVisits                                               map[string]int64
	exitVisits                                                map[string]int64
	sourceVisits                                              map[string]int64
}

// refSession is one session of the reference.
type refSession struct {
	hash                 uint64
	start, end, alive    int64
	pv, custom, interact int64
	entry, exit          string
	first                ingest.Event
	maxScroll            int64
	engaged              bool
}

func (w *genWorld) refSite(from, to time.Time) *refSite {
	lo, hi := from.UnixMilli(), to.UnixMilli()
	in := func(t int64) bool { return t >= lo && t < hi }
	r := &refSite{pagePV: map[string]int64{}, pageVisitors: map[string]map[uint64]bool{},
		countryVisit: map[string]int64{}, entryVisits: map[string]int64{}, exitVisits: map[string]int64{},
		sourceVisits: map[string]int64{}}
	visitors := map[uint64]bool{}
	var evs []ingest.Event
	for _, ev := range w.events {
		if ev.SiteID != genSite {
			continue
		}
		if ev.Bot() {
			if in(ev.Time) {
				r.bots++
			}
			continue
		}
		evs = append(evs, ev)
	}
	count := func(s *refSession) {
		if s == nil || s.pv+s.custom == 0 || s.end < lo || s.start >= hi {
			return
		}
		r.visits++
		r.visitPV += s.pv
		r.durationMS += s.end - s.start
		if s.pv <= 1 && s.interact == 0 {
			r.bounces++
		}
		r.countryVisit[s.first.Country]++
		r.sourceVisits[sources.Source(s.first.ReferrerHost, s.first.UTMSource)]++
		if s.pv > 0 {
			r.entryVisits[s.entry]++
			r.exitVisits[s.exit]++
		}
		if s.engaged {
			r.engagedVisits++
			r.scrollSum += s.maxScroll
		}
	}
	slices.SortFunc(evs, func(a, b ingest.Event) int {
		if a.Time != b.Time {
			return int(a.Time - b.Time)
		}
		return bytes.Compare(a.ID[:], b.ID[:])
	})
	// Sessions by the visitor id they keep (their first event's hash); a
	// later day's hash finds its session through the previous hash it
	// carries, as Plausible looks a session up by the current then the
	// previous salt's id, and then keeps finding it (alias).
	sessions := map[uint64]*refSession{}
	alias := map[uint64]uint64{}
	for _, ev := range evs {
		live := func(h uint64) *refSession {
			if a, ok := alias[h]; ok {
				h = a
			}
			if s := sessions[h]; s != nil && ev.Time-s.alive <= visitGapMS {
				return s
			}
			return nil
		}
		s := live(ev.VisitorHash)
		if s == nil && ev.PrevVisitorHash != 0 {
			if s = live(ev.PrevVisitorHash); s != nil {
				alias[ev.VisitorHash] = s.hash
			}
		}
		if ev.Kind == ingest.KindEngagement {
			if s == nil {
				continue // no session: dropped
			}
			s.alive = max(s.alive, ev.Time)
			if in(ev.Time) {
				r.engagedMS += int64(ev.EngagedMS)
				s.engaged = true
				s.maxScroll = max(s.maxScroll, int64(ev.ScrollDepth))
				visitors[s.hash] = true
				r.addPageVisitor(ev.Path, s.hash)
			}
			continue
		}
		if s == nil {
			delete(alias, ev.VisitorHash)
			count(sessions[ev.VisitorHash])
			s = &refSession{start: ev.Time, first: ev, hash: ev.VisitorHash}
			sessions[ev.VisitorHash] = s
		}
		s.end, s.alive = ev.Time, ev.Time
		switch ev.Kind {
		case ingest.KindPageview:
			if s.pv == 0 {
				s.entry = ev.Path
			}
			s.exit = ev.Path
			s.pv++
		case ingest.KindCustom:
			s.custom++
			if ev.Flags&ingest.FlagNonInteractive == 0 {
				s.interact++
			}
		}
		if !in(ev.Time) {
			continue
		}
		visitors[s.hash] = true
		switch ev.Kind {
		case ingest.KindPageview:
			r.pageviews++
			r.pagePV[ev.Path]++
			r.addPageVisitor(ev.Path, s.hash)
		case ingest.KindCustom:
			r.events++
		}
	}
	for _, s := range sessions {
		count(s)
	}
	r.events += r.pageviews
	r.visitors = int64(len(visitors))
	return r
}

func (r *refSite) addPageVisitor(path string, hash uint64) {
	if r.pageVisitors[path] == nil {
		r.pageVisitors[path] = map[uint64]bool{}
	}
	r.pageVisitors[path][hash] = true
}

// metrics derives the API's metrics from the reference totals, rounded as
// Plausible rounds them (half to even).
func (r *refSite) metrics() query.SiteMetrics {
	return query.SiteMetrics{
		Visits: r.visits, Pageviews: r.pageviews, Events: r.events, BotEvents: r.bots,
		ViewsPerVisit: math.RoundToEven(float64(r.visitPV)/float64(max(r.visits, 1))*100) / 100,
		BounceRate:    math.RoundToEven(float64(r.bounces) / float64(max(r.visits, 1)) * 100),
		VisitDuration: math.RoundToEven(float64(r.durationMS) / float64(max(r.visits, 1)) / 1000),
		TimeOnPage:    math.RoundToEven(float64(r.engagedMS) / float64(max(r.engagedVisits, 1)) / 1000),
		ScrollDepth:   math.RoundToEven(float64(r.scrollSum) / float64(max(r.engagedVisits, 1))),
	}
}

// refClicks counts the link's non-bot clicks, bot clicks and distinct
// visitors in [from, to), and clicks per country.
func (w *genWorld) refClicks(from, to time.Time) (clicks, bots, uniques int64, byCountry map[string]int64) {
	lo, hi := from.UnixMilli(), to.UnixMilli()
	seen := map[uint64]bool{}
	byCountry = map[string]int64{}
	for _, ev := range w.events {
		if ev.Kind != ingest.KindClick || ev.Time < lo || ev.Time >= hi {
			continue
		}
		if ev.Bot() {
			bots++
			continue
		}
		clicks++
		byCountry[ev.Country]++
		seen[ev.VisitorHash] = true
	}
	return clicks, bots, int64(len(seen)), byCountry
}

// hllBound is the error the tests allow an estimate of n: three standard
// errors of a precision-14 sketch (3 * 1.04 / sqrt(2^14) = 2.44 %), and at
// least 1 for tiny n.
func hllBound(n int64) float64 { return math.Max(3*1.04/math.Sqrt(1<<sketchPrecision)*float64(n), 1) }

func wantEstimate(t *testing.T, what string, got uint64, want int64) {
	t.Helper()
	if d := math.Abs(float64(got) - float64(want)); d > hllBound(want) {
		t.Errorf("%s: got %d; want %d within %.1f", what, got, want, hllBound(want))
	}
}

func wantEqual[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s: got %v; want %v", what, got, want)
	}
}

func mustLoc(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("LoadLocation(%q): %v", name, err)
	}
	return loc
}

func (r *refSite) String() string { return fmt.Sprintf("%+v", *r) }
