package harness

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/waymark/waymark/ingest"
)

// HotConfig describes the two hot entities of the query benchmark: one
// link with ClicksPerDay clicks and one site with PageviewsPerDay
// pageviews, every day of Days whole UTC days from Start. No bots, so a
// day's count is exactly its configured number.
type HotConfig struct {
	Seed            uint64
	Start           time.Time // midnight UTC of the first day
	Days            int
	Code            string
	SiteID          string
	ClicksPerDay    int
	PageviewsPerDay int
	// LinkVisitors and SiteVisitors are the populations the day's events
	// come from (skewed: some visitors come back far more often than
	// others); zero means a third of the day's events.
	LinkVisitors, SiteVisitors int
	Pages                      int // zero means 1000
	Node, Region               string
}

// HotGen streams a HotConfig's events in time order.
type HotGen struct {
	cfg        HotConfig
	r, idR     *rand.Rand
	pageZ      *rand.Zipf
	clicks, pv []cumulativeAlloc // per day, over its minutes
	linkAttrs  []visitorAttrs
	siteAttrs  []visitorAttrs
	minute     int
	minutes    int
	buf        []ingest.Event
	bufPos     int
}

// NewHotGen checks cfg and prepares the stream.
func NewHotGen(cfg HotConfig) (*HotGen, error) {
	switch {
	case cfg.Days <= 0 || cfg.ClicksPerDay < 0 || cfg.PageviewsPerDay < 0:
		return nil, errors.New("cannot generate hot events: Days must be positive and the daily counts not negative")
	case cfg.Start.UTC() != cfg.Start.UTC().Truncate(24*time.Hour):
		return nil, errors.New("cannot generate hot events: Start must be a midnight UTC")
	case cfg.ClicksPerDay > 0 && cfg.Code == "", cfg.PageviewsPerDay > 0 && cfg.SiteID == "":
		return nil, errors.New("cannot generate hot events: clicks need a Code and pageviews a SiteID")
	}
	if cfg.LinkVisitors <= 0 {
		cfg.LinkVisitors = max(cfg.ClicksPerDay/3, 1)
	}
	if cfg.SiteVisitors <= 0 {
		cfg.SiteVisitors = max(cfg.PageviewsPerDay/3, 1)
	}
	if cfg.Pages <= 0 {
		cfg.Pages = 1000
	}
	g := &HotGen{cfg: cfg, minutes: cfg.Days * 1440,
		r: rand.New(rand.NewPCG(cfg.Seed, 11)), idR: rand.New(rand.NewPCG(cfg.Seed, 12)),
		linkAttrs: makeVisitorAttrs(cfg.Seed^1, cfg.LinkVisitors, 0),
		siteAttrs: makeVisitorAttrs(cfg.Seed^2, cfg.SiteVisitors, 0),
	}
	g.pageZ = rand.NewZipf(g.r, 1.1, 1, uint64(cfg.Pages-1))
	start := cfg.Start.UTC()
	for d := range cfg.Days {
		day := start.AddDate(0, 0, d)
		w := func(m int) float64 { return trafficWeight(day, m) }
		g.clicks = append(g.clicks, newCumulativeAlloc(cfg.ClicksPerDay, 1440, w))
		g.pv = append(g.pv, newCumulativeAlloc(cfg.PageviewsPerDay, 1440, w))
	}
	return g, nil
}

// Total is the number of events the stream holds.
func (g *HotGen) Total() int { return g.cfg.Days * (g.cfg.ClicksPerDay + g.cfg.PageviewsPerDay) }

// Next fills ev with the next event and reports whether there was one.
func (g *HotGen) Next(ev *ingest.Event) bool {
	for g.bufPos == len(g.buf) {
		if g.minute == g.minutes {
			return false
		}
		g.fillMinute()
	}
	*ev = g.buf[g.bufPos]
	g.buf[g.bufPos] = ingest.Event{}
	g.bufPos++
	return true
}

// skewed picks one of n visitors, the low numbers far more often: the
// first k of n come up with chance sqrt(k/n).
func skewed(r *rand.Rand, n int) int {
	u := r.Float64()
	return min(int(u*u*float64(n)), n-1)
}

func (g *HotGen) fillMinute() {
	g.buf, g.bufPos = g.buf[:0], 0
	m := g.minute
	g.minute++
	d, mm := m/1440, m%1440
	base := g.cfg.Start.UnixMilli() + int64(m)*60_000
	day := dayOfMS(base)
	for range g.clicks[d].at(mm) {
		v := skewed(g.r, g.cfg.LinkVisitors)
		ev := ingest.Event{
			Kind: ingest.KindClick, Time: base + g.r.Int64N(60_000), Code: g.cfg.Code,
			Node: g.cfg.Node, Region: g.cfg.Region, ReferrerHost: referrer(g.r, genClickReferrers),
			VisitorHash: visitorHash(g.cfg.Seed, v, day, g.cfg.Code),
		}
		g.linkAttrs[v].apply(&ev, false)
		g.buf = append(g.buf, ev)
	}
	for range g.pv[d].at(mm) {
		v := skewed(g.r, g.cfg.SiteVisitors)
		t := base + g.r.Int64N(60_000)
		ev := ingest.Event{
			Kind: ingest.KindPageview, Name: "pageview", Time: t,
			SiteID: g.cfg.SiteID, Path: pagePath(int(g.pageZ.Uint64())),
			Node: g.cfg.Node, Region: g.cfg.Region, ReferrerHost: referrer(g.r, genReferrers),
			VisitorHash: visitorHash(g.cfg.Seed, v, day, g.cfg.SiteID),
		}
		if t%86_400_000 < 30*60_000 {
			ev.PrevVisitorHash = visitorHash(g.cfg.Seed, v, day-1, g.cfg.SiteID)
		}
		g.siteAttrs[v].apply(&ev, false)
		g.buf = append(g.buf, ev)
	}
	slices.SortStableFunc(g.buf, func(a, b ingest.Event) int { return cmpInt64(a.Time, b.Time) })
	for i := range g.buf {
		g.buf[i].ID = randomID(g.idR)
	}
}

// ScaledPerDay is round(perDay * scale), at least 1: the daily count of a
// hot entity at a -scale.
func ScaledPerDay(perDay int, scale float64) int {
	return max(int(math.Round(float64(perDay)*scale)), 1)
}
