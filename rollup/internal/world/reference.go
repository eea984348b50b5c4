package world

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
	"github.com/waymark/waymark/rollup/sources"
)

// RefSite is the plain reference: every site metric over [from, to),
// computed from the raw events with no rollups, by Plausible's
// definitions (rollup/DESIGN.md): sessions end after 30 minutes without
// activity (engagement events keep one alive but never start one); a
// session counts in a range it overlaps; bounce is at most one pageview
// and no interactive custom event; duration runs to the last event that is
// not an engagement; pageviews, events and visitors are the events' own.
type RefSite struct {
	Visitors, Visits, Pageviews, Bounces, VisitPV, DurationMS int64
	Events, EngagedMS, EngagedVisits, ScrollSum, Bots         int64
	PagePV                                                    map[string]int64
	PageVisitors                                              map[string]map[uint64]bool
	CountryVisit                                              map[string]int64
	EntryVisits                                               map[string]int64
	ExitVisits                                                map[string]int64
	SourceVisits                                              map[string]int64
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

// RefSite computes the reference over [from, to).
func (w *World) RefSite(from, to time.Time) *RefSite {
	lo, hi := from.UnixMilli(), to.UnixMilli()
	in := func(t int64) bool { return t >= lo && t < hi }
	r := &RefSite{PagePV: map[string]int64{}, PageVisitors: map[string]map[uint64]bool{},
		CountryVisit: map[string]int64{}, EntryVisits: map[string]int64{}, ExitVisits: map[string]int64{},
		SourceVisits: map[string]int64{}}
	visitors := map[uint64]bool{}
	var evs []ingest.Event
	for _, ev := range w.Events {
		if ev.SiteID != Site {
			continue
		}
		if ev.Bot() {
			if in(ev.Time) {
				r.Bots++
			}
			continue
		}
		evs = append(evs, ev)
	}
	count := func(s *refSession) {
		if s == nil || s.pv+s.custom == 0 || s.end < lo || s.start >= hi {
			return
		}
		r.Visits++
		r.VisitPV += s.pv
		r.DurationMS += s.end - s.start
		if s.pv <= 1 && s.interact == 0 {
			r.Bounces++
		}
		r.CountryVisit[s.first.Country]++
		r.SourceVisits[sources.Source(s.first.ReferrerHost, s.first.UTMSource)]++
		if s.pv > 0 {
			r.EntryVisits[s.entry]++
			r.ExitVisits[s.exit]++
		}
		if s.engaged {
			r.EngagedVisits++
			r.ScrollSum += s.maxScroll
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
			if s := sessions[h]; s != nil && ev.Time-s.alive <= VisitGapMS {
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
				r.EngagedMS += int64(ev.EngagedMS)
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
			r.Pageviews++
			r.PagePV[ev.Path]++
			r.addPageVisitor(ev.Path, s.hash)
		case ingest.KindCustom:
			r.Events++
		}
	}
	for _, s := range sessions {
		count(s)
	}
	r.Events += r.Pageviews
	r.Visitors = int64(len(visitors))
	return r
}

func (r *RefSite) addPageVisitor(path string, hash uint64) {
	if r.PageVisitors[path] == nil {
		r.PageVisitors[path] = map[uint64]bool{}
	}
	r.PageVisitors[path][hash] = true
}

// metrics derives the API's metrics from the reference totals, rounded as
// Plausible rounds them (half to even).
func (r *RefSite) Metrics() query.SiteMetrics {
	return query.SiteMetrics{
		Visits: r.Visits, Pageviews: r.Pageviews, Events: r.Events, BotEvents: r.Bots,
		ViewsPerVisit: math.RoundToEven(float64(r.VisitPV)/float64(max(r.Visits, 1))*100) / 100,
		BounceRate:    math.RoundToEven(float64(r.Bounces) / float64(max(r.Visits, 1)) * 100),
		VisitDuration: math.RoundToEven(float64(r.DurationMS) / float64(max(r.Visits, 1)) / 1000),
		TimeOnPage:    math.RoundToEven(float64(r.EngagedMS) / float64(max(r.EngagedVisits, 1)) / 1000),
		ScrollDepth:   math.RoundToEven(float64(r.ScrollSum) / float64(max(r.EngagedVisits, 1))),
	}
}

// refClicks counts the link's non-bot clicks, bot clicks and distinct
// visitors in [from, to), and clicks per country.
func (w *World) RefClicks(from, to time.Time) (clicks, bots, uniques int64, byCountry map[string]int64) {
	lo, hi := from.UnixMilli(), to.UnixMilli()
	seen := map[uint64]bool{}
	byCountry = map[string]int64{}
	for _, ev := range w.Events {
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

func (r *RefSite) String() string { return fmt.Sprintf("%+v", *r) }
