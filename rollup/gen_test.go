package rollup

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
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
		hash := uint64(v+1) * 0x9e3779b97f4a7c15
		bot := v%20 == 0
		country, device, browser, os := pick(genCountries), pick(genDevices), pick(genBrowsers), pick(genOSes)
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
					Browser: browser, OS: os, VisitorHash: hash, Node: "edge-1", Region: "eu",
				}
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
					w.events = append(w.events, eng)
				}
				if rng.IntN(6) == 0 {
					c := ev
					c.Kind, c.Name, c.ID, c.Time = ingest.KindCustom, "signup", id(), t+dwell/2
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
	return w
}

// segments cuts the stream into sealed segments of per events.
func (w *genWorld) segments(node string, per int) [][]byte {
	var out [][]byte
	for i, seq := 0, uint64(1); i < len(w.events); i, seq = i+per, seq+1 {
		out = append(out, segmentBytes(node, seq, w.events[i:min(i+per, len(w.events))]...))
	}
	return out
}

// refSite is the plain reference: every site metric over [from, to),
// computed from the raw events with no rollups.
type refSite struct {
	visitors, visits, pageviews, bounces, visitPV, durationMS int64
	events, engagedMS, engagements, scrollSum, bots           int64
	pagePV                                                    map[string]int64
	pageVisitors                                              map[string]map[uint64]bool
	countryVisit                                              map[string]int64
	entryVisits                                               map[string]int64
	exitVisits                                                map[string]int64
	sourceVisits                                              map[string]int64
}

func (w *genWorld) refSite(from, to time.Time) *refSite {
	lo, hi := from.UnixMilli(), to.UnixMilli()
	in := func(t int64) bool { return t >= lo && t < hi }
	r := &refSite{pagePV: map[string]int64{}, pageVisitors: map[string]map[uint64]bool{},
		countryVisit: map[string]int64{}, entryVisits: map[string]int64{}, exitVisits: map[string]int64{},
		sourceVisits: map[string]int64{}}
	visitors := map[uint64]bool{}
	byVisitor := map[uint64][]ingest.Event{}
	for _, ev := range w.events {
		if ev.SiteID != genSite || w.late[ev.ID] {
			continue
		}
		if ev.Bot() {
			if in(ev.Time) {
				r.bots++
			}
			continue
		}
		byVisitor[ev.VisitorHash] = append(byVisitor[ev.VisitorHash], ev)
		if !in(ev.Time) {
			continue
		}
		switch ev.Kind {
		case ingest.KindPageview:
			r.pageviews++
			r.pagePV[ev.Path]++
			if r.pageVisitors[ev.Path] == nil {
				r.pageVisitors[ev.Path] = map[uint64]bool{}
			}
			r.pageVisitors[ev.Path][ev.VisitorHash] = true
			visitors[ev.VisitorHash] = true
		case ingest.KindCustom:
			r.events++
			visitors[ev.VisitorHash] = true
		case ingest.KindEngagement:
			r.engagedMS += int64(ev.EngagedMS)
			r.engagements++
			r.scrollSum += int64(ev.ScrollDepth)
		}
	}
	r.visitors = int64(len(visitors))
	for _, evs := range byVisitor {
		slices.SortFunc(evs, func(a, b ingest.Event) int {
			if a.Time != b.Time {
				return int(a.Time - b.Time)
			}
			return bytes.Compare(a.ID[:], b.ID[:])
		})
		for i := 0; i < len(evs); {
			j := i + 1
			for j < len(evs) && evs[j].Time-evs[j-1].Time <= visitGapMS {
				j++
			}
			visit := evs[i:j]
			i = j
			var pv, custom int64
			var entry, exit string
			for _, ev := range visit {
				switch ev.Kind {
				case ingest.KindPageview:
					if pv == 0 {
						entry = ev.Path
					}
					exit = ev.Path
					pv++
				case ingest.KindCustom:
					custom++
				}
			}
			if pv+custom == 0 || !in(visit[0].Time) {
				continue
			}
			r.visits++
			r.visitPV += pv
			r.durationMS += visit[len(visit)-1].Time - visit[0].Time
			if pv == 1 {
				r.bounces++
			}
			r.countryVisit[visit[0].Country]++
			src := visit[0].UTMSource
			if src == "" {
				src = visit[0].ReferrerHost
				if len(src) > 4 && src[:4] == "www." {
					src = src[4:]
				}
			}
			r.sourceVisits[src]++
			if pv > 0 {
				r.entryVisits[entry]++
				r.exitVisits[exit]++
			}
		}
	}
	return r
}

// metrics derives the API's metrics from the reference totals, by the
// definitions in the package doc.
func (r *refSite) metrics() SiteMetrics {
	return SiteMetrics{
		Visits: r.visits, Pageviews: r.pageviews, Events: r.events, BotEvents: r.bots,
		ViewsPerVisit: round2(ratio(r.visitPV, r.visits)),
		BounceRate:    round2(100 * ratio(r.bounces, r.visits)),
		VisitDuration: round2(ratio(r.durationMS, r.visits) / 1000),
		TimeOnPage:    round2(ratio(r.engagedMS, r.pageviews) / 1000),
		ScrollDepth:   round2(ratio(r.scrollSum, r.engagements)),
	}
}

// refClicks counts the link's non-bot clicks, bot clicks and distinct
// visitors in [from, to), and clicks per country.
func (w *genWorld) refClicks(from, to time.Time) (clicks, bots, uniques int64, byCountry map[string]int64) {
	lo, hi := from.UnixMilli(), to.UnixMilli()
	seen := map[uint64]bool{}
	byCountry = map[string]int64{}
	for _, ev := range w.events {
		if ev.Kind != ingest.KindClick || ev.Time < lo || ev.Time >= hi || w.late[ev.ID] {
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
