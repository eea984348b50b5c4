// Package world is the generated world the rollup tests check every
// metric against: a deterministic stream of link clicks and site visits
// (multi-page visits, bounces, engagement, custom events, bots, visits
// across midnight UTC, late events) with a plain reference computed from
// the raw events by Plausible's definitions, and the sealed segments that
// carry them. It imports no backend, so the aggregator's own tests, the
// HTTP layer's (rollup/api) and another backend's can all feed it and
// compare their answers with the same reference.
package world

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/waymark/waymark/ingest"
)

// Base is the clock's start in every test: noon, so an hour either way
// stays on the same day.
var Base = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// The rules of the model the reference follows, as the aggregator keeps
// them (rollup's tests check that they agree).
const (
	// VisitGapMS: a visit ends after 30 minutes without activity.
	VisitGapMS = 30 * 60 * 1000
	// SketchPrecision is the HyperLogLog precision of visitor sets.
	SketchPrecision = 14

	msPerDay = int64(24 * time.Hour / time.Millisecond)
)

// Mix64 is the SplitMix64 finaliser the visitor hashes are spread with
// (the aggregator mixes hashes with the same function).
func Mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// SegmentBytes frames events as a sealed segment file of node and seq, by
// the layout documented in ingest/segment.go (the ingest package exports
// no segment encoder; its writer only writes files).
func SegmentBytes(node string, seq uint64, events ...ingest.Event) []byte {
	crcTable := crc32.MakeTable(crc32.Castagnoli)
	b := []byte("WMSG")
	b = append(b, 1)
	b = binary.BigEndian.AppendUint64(b, seq)
	b = binary.BigEndian.AppendUint64(b, uint64(Base.UnixMilli()))
	b = binary.AppendUvarint(b, uint64(len(node)))
	b = append(b, node...)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
	var payload []byte
	for i := range events {
		payload = ingest.AppendEvent(payload[:0], &events[i])
		b = binary.AppendUvarint(b, uint64(len(payload)))
		b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(payload, crcTable))
		b = append(b, payload...)
	}
	footer := binary.BigEndian.AppendUint64([]byte{0}, uint64(len(events)))
	footer = binary.LittleEndian.AppendUint32(footer, crc32.Checksum(footer, crcTable))
	return append(b, footer...)
}

// The generated world: one link and one site (in New York) over the three
// days before Base, seen from Base.
const (
	Code = "lnk0001"
	Site = "site-ny"
	TZ   = "America/New_York"
)

var (
	Countries = []string{"DE", "US", "FR", "JP", "BR"}
	Devices   = []string{"desktop", "mobile", "tablet"}
	Browsers  = []string{"Firefox", "Chrome", "Safari"}
	OSes      = []string{"Linux", "Windows", "iOS", "Android"}
	Pages     = []string{"/", "/pricing", "/docs", "/blog/a", "/blog/b", "/signup"}
	Referrers = []string{"", "", "www.google.com", "news.ycombinator.com", "t.co"}
)

// World is a deterministic stream of events and what the tests know of
// it: which ones arrived past the late window.
type World struct {
	Events []ingest.Event
	Late   map[[16]byte]bool
}

// Detail gives visitor v's region, city, browser and OS versions,
// from v alone (the random stream stays as it was): some visitors without
// a region, some with a region and no city, some without versions.
func Detail(v int, country string) (region, city, browserVersion, osVersion string) {
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

// Generate makes visitors with multi-page visits, bounces, engagement,
// custom events, bots, visits across midnight UTC, late events (older
// than the 48 h late window at Base) and clicks, in a shuffled order
// (edges ship out of order).
func Generate(seed uint64) *World {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	w := &World{Late: make(map[[16]byte]bool)}
	n := 0
	id := func() [16]byte {
		n++
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], seed)
		binary.BigEndian.PutUint64(b[8:], uint64(n))
		return b
	}
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	start := Base.Add(-47 * time.Hour)
	span := int64(47 * time.Hour / time.Millisecond)

	for v := range 300 {
		// A visitor's hash changes with the UTC day, and events of the
		// first half hour of a day also carry yesterday's, as ingest
		// hashes them.
		stamp := func(ev *ingest.Event) {
			d := uint64(ev.Time / msPerDay)
			ev.VisitorHash = Hash(v, d)
			ev.PrevVisitorHash = 0
			if ev.Time%msPerDay < VisitGapMS {
				ev.PrevVisitorHash = Hash(v, d-1)
			}
		}
		bot := v%20 == 0
		country, device, browser, os := pick(Countries), pick(Devices), pick(Browsers), pick(OSes)
		region, city, browserVersion, osVersion := Detail(v, country)
		visits := 1 + rng.IntN(3)
		t := start.UnixMilli() + rng.Int64N(span)
		if v%25 == 1 {
			// Across midnight UTC: starts at 23:50, goes on past 00:00.
			mid := Base.Truncate(24 * time.Hour).Add(-24*time.Hour - 10*time.Minute)
			t = mid.UnixMilli()
			visits = 1
		}
		for range visits {
			ref, utm := pick(Referrers), ""
			if rng.IntN(4) == 0 {
				utm = "newsletter"
			}
			pages := 1 + rng.IntN(5)
			if v%25 == 1 {
				pages = 4
			}
			for p := range pages {
				ev := ingest.Event{
					Kind: ingest.KindPageview, ID: id(), Time: t, SiteID: Site, Name: "pageview",
					Path: pick(Pages), ReferrerHost: ref, UTMSource: utm, Country: country, Device: device,
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
				w.Events = append(w.Events, ev)
				dwell := int64(5_000 + rng.IntN(8*60_000))
				if rng.IntN(3) > 0 {
					eng := ev
					eng.Kind, eng.Name, eng.ID, eng.Time = ingest.KindEngagement, "engagement", id(), t+dwell
					eng.EngagedMS, eng.ScrollDepth = uint64(dwell*3/4), uint8(rng.IntN(101))
					stamp(&eng)
					w.Events = append(w.Events, eng)
				}
				if rng.IntN(6) == 0 {
					c := ev
					c.Kind, c.Name, c.ID, c.Time = ingest.KindCustom, "signup", id(), t+dwell/2
					stamp(&c)
					w.Events = append(w.Events, c)
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
			Kind: ingest.KindPageview, ID: id(), Time: Base.Add(-50*time.Hour + time.Duration(i)*time.Minute).UnixMilli(),
			SiteID: Site, Name: "pageview", Path: "/late", VisitorHash: 77, Node: "edge-2",
		}
		w.Late[ev.ID] = true
		w.Events = append(w.Events, ev)
	}
	// Clicks.
	for i := range 600 {
		ev := ingest.Event{
			Kind: ingest.KindClick, ID: id(), Time: start.UnixMilli() + rng.Int64N(span), Code: Code,
			Country: pick(Countries), Device: pick(Devices), Browser: pick(Browsers), OS: pick(OSes),
			ReferrerHost: pick(Referrers), VisitorHash: uint64(1 + rng.IntN(250)), Node: "edge-1",
		}
		if i%10 == 0 {
			ev.Flags |= ingest.FlagBot
		}
		if i%7 == 0 {
			ev.UTMSource, ev.UTMCampaign = "mail", "launch"
		}
		w.Events = append(w.Events, ev)
	}
	rng.Shuffle(len(w.Events), func(i, j int) { w.Events[i], w.Events[j] = w.Events[j], w.Events[i] })
	// Engagement events reach the aggregator after the pageview they
	// follow (the tracker sends them later, and an edge ships in order);
	// one that arrived first would be dropped, as Plausible drops an
	// engagement without a live session.
	// The late visitor's events arrive together, last: an edge cut off for
	// two days ships its old segments in order when it is back.
	var rest, engagements, late []ingest.Event
	for _, ev := range w.Events {
		switch {
		case w.Late[ev.ID]:
			late = append(late, ev)
		case ev.Kind == ingest.KindEngagement:
			engagements = append(engagements, ev)
		default:
			rest = append(rest, ev)
		}
	}
	w.Events = append(append(rest, engagements...), late...)
	return w
}

// inTimeOrder is the world as a healthy deployment delivers it: events in
// time order (each edge ships its segments in order, and the aggregator
// interleaves the edges' batches), the late visitor's events still last.
func (w *World) InTimeOrder() *World {
	out := &World{Late: w.Late}
	var late []ingest.Event
	for _, ev := range w.Events {
		if w.Late[ev.ID] {
			late = append(late, ev)
			continue
		}
		out.Events = append(out.Events, ev)
	}
	slices.SortStableFunc(out.Events, func(x, y ingest.Event) int { return cmp.Compare(x.Time, y.Time) })
	out.Events = append(out.Events, late...)
	return out
}

// Only returns the world narrowed to the site events keep accepts.
func (w *World) Only(keep func(ev *ingest.Event) bool) *World {
	out := &World{Late: w.Late}
	for _, ev := range w.Events {
		if ev.SiteID == Site && keep(&ev) {
			out.Events = append(out.Events, ev)
		}
	}
	return out
}

// Hash is visitor v's hash on UTC day d.
func Hash(v int, d uint64) uint64 { return Mix64(uint64(v+1)<<24 | d) }

// segments cuts the stream into sealed segments of per events.
func (w *World) Segments(node string, per int) [][]byte {
	var out [][]byte
	for i, seq := 0, uint64(1); i < len(w.Events); i, seq = i+per, seq+1 {
		out = append(out, SegmentBytes(node, seq, w.Events[i:min(i+per, len(w.Events))]...))
	}
	return out
}
