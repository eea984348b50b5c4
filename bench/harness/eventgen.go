package harness

import (
	"container/heap"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/waymark/waymark/ingest"
)

// SpreadConfig describes a realistic mix of analytics events over many
// sites, links, pages and visitors: what an aggregator receives from a
// busy deployment. The same config always yields the same events.
type SpreadConfig struct {
	Seed   uint64
	Events int       // exactly this many when there are links (clicks make up the rest); about this many otherwise
	Start  time.Time // first instant; events lie in [Start, Start + Days)
	Days   int
	Sites  []string // site ids the site events belong to
	Links  []string // link codes the clicks belong to
	// Visitors is the population events come from; zero means 100,000.
	Visitors int
	// Pages per site; zero means 500.
	Pages int
	// ClickShare is the share of clicks among the events, 0 to 1; it is
	// forced to 0 without links and to 1 without sites.
	ClickShare   float64
	Node, Region string // the capturing edge written into every event
}

// SpreadGen streams the events of a SpreadConfig in time order (ties in
// a fixed order).
//
// Model: visitors are a fixed population; each has a country, device,
// browser and OS of its own (weighted like real traffic). Site traffic
// comes in sessions: a session starts at a time drawn from a daily and
// weekly curve, on a site picked by Zipf popularity, with a referrer (40 %
// direct, search, social, a long tail) and sometimes UTM tags; it has 1 +
// geometric(1/2) pageviews (half of the sessions bounce) on Zipf-popular
// pages, each followed by an engagement event (90 %) after a lognormal
// visible time and sometimes (10 %) a custom event with a property. 2 % of
// sessions are crawlers (bot flag, no engagement). Clicks are single
// events on Zipf-popular links by the same visitors (3 % bots), spread
// over the same curve. Visitor hashes change with the UTC day, as the
// edge's daily salt does, and site events in the first 30 minutes of a UTC
// day carry the previous day's hash too.
type SpreadGen struct {
	cfg        SpreadConfig
	siteEvents int // site events the sessions make, from a counting pass
	clicks     int
	total      int

	attrs   []visitorAttrs
	sess    *sessionSim
	clickR  *rand.Rand
	idR     *rand.Rand
	linkZ   *rand.Zipf
	minute  int
	minutes int
	clickW  cumulativeAlloc
	buf     []ingest.Event
	bufPos  int
	emitted int
}

// Pages, referrers and other value lists of the generators.
var (
	genReferrers = weighted[string]{
		{"", 40}, {"www.google.com", 25}, {"duckduckgo.com", 4}, {"www.bing.com", 3},
		{"t.co", 5}, {"www.facebook.com", 5}, {"news.ycombinator.com", 3}, {"github.com", 3},
		{"*tail", 12},
	}
	genClickReferrers = weighted[string]{
		{"", 50}, {"t.co", 15}, {"www.facebook.com", 10}, {"www.linkedin.com", 5},
		{"mail.google.com", 5}, {"www.instagram.com", 5}, {"*tail", 10},
	}
	genCountries = weighted[string]{
		{"US", 30}, {"DE", 8}, {"GB", 7}, {"FR", 5}, {"IN", 6}, {"BR", 4}, {"CA", 4}, {"JP", 4},
		{"NL", 3}, {"ES", 3}, {"IT", 3}, {"AU", 2}, {"PL", 2}, {"SE", 2}, {"MX", 2}, {"KR", 2},
		{"CH", 1}, {"AT", 1}, {"BE", 1}, {"DK", 1}, {"FI", 1}, {"NO", 1}, {"IE", 1}, {"PT", 1},
		{"CZ", 1}, {"AR", 1}, {"ZA", 1}, {"SG", 1}, {"TR", 1}, {"", 2},
	}
	genDevices  = weighted[string]{{"desktop", 55}, {"mobile", 40}, {"tablet", 5}}
	genBrowsers = weighted[string]{{"Chrome", 60}, {"Safari", 20}, {"Firefox", 8}, {"Edge", 8}, {"Samsung Internet", 4}}
	genCustoms  = []struct{ name, key, value string }{
		{"Signup", "plan", "pro"}, {"Download", "file", "guide.pdf"},
		{"Outbound Link: Click", "url", "https://partner.example/landing"}, {"Purchase", "amount", "49"},
	}
	genUTMSources = []string{"newsletter", "twitter", "google", "partner"}
	genUTMMedia   = []string{"email", "social", "cpc", "referral"}
	genPathRoots  = []string{"/blog/", "/products/", "/docs/", "/help/"}
)

type weighted[T any] []struct {
	v T
	w int
}

func (ws weighted[T]) pick(r *rand.Rand) T {
	total := 0
	for _, x := range ws {
		total += x.w
	}
	n := r.IntN(total)
	for _, x := range ws {
		if n < x.w {
			return x.v
		}
		n -= x.w
	}
	return ws[len(ws)-1].v
}

// NewSpreadGen checks cfg and prepares the stream; it runs the site
// sessions once without keeping them, to learn how many events they make,
// so the clicks can bring the total to exactly cfg.Events.
func NewSpreadGen(cfg SpreadConfig) (*SpreadGen, error) {
	switch {
	case cfg.Events <= 0 || cfg.Days <= 0:
		return nil, errors.New("cannot generate events: Events and Days must be positive")
	case len(cfg.Sites) == 0 && len(cfg.Links) == 0:
		return nil, errors.New("cannot generate events: no sites and no links")
	case cfg.ClickShare < 0 || cfg.ClickShare > 1:
		return nil, fmt.Errorf("cannot generate events: ClickShare %v is not in 0..1", cfg.ClickShare)
	}
	if cfg.Visitors <= 0 {
		cfg.Visitors = 100_000
	}
	if cfg.Pages <= 0 {
		cfg.Pages = 500
	}
	switch {
	case len(cfg.Links) == 0:
		cfg.ClickShare = 0
	case len(cfg.Sites) == 0:
		cfg.ClickShare = 1
	}
	g := &SpreadGen{cfg: cfg, minutes: cfg.Days * 24 * 60, attrs: makeVisitorAttrs(cfg.Seed, cfg.Visitors, genBots)}
	siteTarget := int(math.Round(float64(cfg.Events) * (1 - cfg.ClickShare)))
	if siteTarget > 0 {
		count := newSessionSim(cfg, g.attrs, siteTarget)
		var ev ingest.Event
		for m := range g.minutes {
			count.minute(m, func(*ingest.Event) { g.siteEvents++ }, &ev)
		}
	}
	g.clicks = 0
	if len(cfg.Links) > 0 {
		g.clicks = max(cfg.Events-g.siteEvents, 0)
	}
	g.total = g.siteEvents + g.clicks
	if siteTarget > 0 {
		g.sess = newSessionSim(cfg, g.attrs, siteTarget)
	}
	g.clickR = rand.New(rand.NewPCG(cfg.Seed, 2))
	g.idR = rand.New(rand.NewPCG(cfg.Seed, 3))
	if len(cfg.Links) > 0 {
		g.linkZ = rand.NewZipf(g.clickR, 1.2, 1, uint64(len(cfg.Links)-1))
	}
	g.clickW = newCumulativeAlloc(g.clicks, g.minutes, func(m int) float64 { return trafficWeight(cfg.Start, m) })
	return g, nil
}

// Total is the number of events the stream holds.
func (g *SpreadGen) Total() int { return g.total }

// Clicks is how many of them are clicks; the rest are site events.
func (g *SpreadGen) Clicks() int { return g.clicks }

// Next fills ev with the next event and reports whether there was one.
// The strings in ev may be kept; ev's Props slice is replaced, not reused.
func (g *SpreadGen) Next(ev *ingest.Event) bool {
	for g.bufPos == len(g.buf) {
		if g.minute == g.minutes {
			return false
		}
		g.fillMinute()
	}
	*ev = g.buf[g.bufPos]
	g.buf[g.bufPos] = ingest.Event{}
	g.bufPos++
	g.emitted++
	return true
}

// fillMinute collects the site events and clicks of the next minute and
// sorts them by time.
func (g *SpreadGen) fillMinute() {
	g.buf, g.bufPos = g.buf[:0], 0
	m := g.minute
	g.minute++
	if g.sess != nil {
		var scratch ingest.Event
		g.sess.minute(m, func(ev *ingest.Event) { g.buf = append(g.buf, *ev) }, &scratch)
	}
	base := g.cfg.Start.UnixMilli() + int64(m)*60_000
	for range g.clickW.at(m) {
		g.buf = append(g.buf, g.click(base+g.clickR.Int64N(60_000)))
	}
	slices.SortStableFunc(g.buf, func(a, b ingest.Event) int { return cmpInt64(a.Time, b.Time) })
	for i := range g.buf {
		g.buf[i].ID = randomID(g.idR)
	}
}

func (g *SpreadGen) click(ms int64) ingest.Event {
	r := g.clickR
	bot := r.IntN(100) < 3
	v := r.IntN(g.cfg.Visitors)
	if bot {
		v = g.cfg.Visitors + r.IntN(genBots)
	}
	code := g.cfg.Links[g.linkZ.Uint64()]
	ev := ingest.Event{
		Kind: ingest.KindClick, Time: ms, Code: code, Node: g.cfg.Node, Region: g.cfg.Region,
		ReferrerHost: referrer(r, genClickReferrers),
	}
	ev.VisitorHash = visitorHash(g.cfg.Seed, v, dayOfMS(ms), code)
	g.attrs[v].apply(&ev, bot)
	return ev
}

// sessionSim runs the site sessions minute by minute: sessions start on
// the traffic curve and schedule their events in a heap by time.
type sessionSim struct {
	cfg    SpreadConfig
	attrs  []visitorAttrs
	r      *rand.Rand
	siteZ  *rand.Zipf
	pageZ  *rand.Zipf
	starts cumulativeAlloc
	active sessionHeap
	nextID uint64
}

// eventsPerSession is the model's mean: 2 pageviews, each with an
// engagement 90 % and a custom event 10 % of the time.
const eventsPerSession = 2 * (1 + 0.9 + 0.1)

func newSessionSim(cfg SpreadConfig, attrs []visitorAttrs, siteEvents int) *sessionSim {
	r := rand.New(rand.NewPCG(cfg.Seed, 1))
	sessions := int(math.Round(float64(siteEvents) / eventsPerSession))
	s := &sessionSim{
		cfg: cfg, r: r, attrs: attrs,
		siteZ: rand.NewZipf(r, 1.3, 1, uint64(len(cfg.Sites)-1)),
		pageZ: rand.NewZipf(r, 1.2, 1, uint64(cfg.Pages-1)),
	}
	s.starts = newCumulativeAlloc(sessions, cfg.Days*24*60, func(m int) float64 { return trafficWeight(cfg.Start, m) })
	return s
}

type session struct {
	id       uint64
	next     int64 // time of its next event, Unix ms
	visitor  int
	bot      bool
	site     string
	page     int
	referrer string
	utm      [3]string
	left     int  // pageviews still to come after the current one
	stage    byte // what comes next: 'p' pageview, 'e' engagement, 'c' custom
	engaged  int64
	custom   bool
	entry    bool
}

type sessionHeap []*session

func (h sessionHeap) Len() int { return len(h) }
func (h sessionHeap) Less(i, j int) bool {
	return h[i].next < h[j].next || (h[i].next == h[j].next && h[i].id < h[j].id)
}
func (h sessionHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *sessionHeap) Push(x any)   { *h = append(*h, x.(*session)) }
func (h *sessionHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	*h = old[:len(old)-1]
	return s
}

// minute starts the sessions of minute m and emits, in time order, every
// session event before the minute's end; events past the span are cut.
func (s *sessionSim) minute(m int, emit func(*ingest.Event), ev *ingest.Event) {
	base := s.cfg.Start.UnixMilli() + int64(m)*60_000
	for range s.starts.at(m) {
		heap.Push(&s.active, s.start(base+s.r.Int64N(60_000)))
	}
	end := base + 60_000
	spanEnd := s.cfg.Start.UnixMilli() + int64(s.cfg.Days)*86_400_000
	for len(s.active) > 0 && s.active[0].next < end {
		ss := s.active[0]
		s.event(ss, ev)
		emit(ev)
		if s.advance(ss) && ss.next < spanEnd {
			heap.Fix(&s.active, 0)
		} else {
			heap.Pop(&s.active)
		}
	}
}

func (s *sessionSim) start(ms int64) *session {
	r := s.r
	ss := &session{id: s.nextID, next: ms, stage: 'p', entry: true}
	s.nextID++
	ss.bot = r.IntN(100) < 2
	if ss.bot {
		ss.visitor = s.cfg.Visitors + r.IntN(genBots)
		ss.left = r.IntN(3)
	} else {
		ss.visitor = r.IntN(s.cfg.Visitors)
		for r.IntN(2) == 0 {
			ss.left++
		}
		ss.referrer = referrer(r, genReferrers)
		if r.IntN(100) < 15 {
			k := r.IntN(20)
			ss.utm = [3]string{genUTMSources[k%4], genUTMMedia[k%4], "campaign-" + strconv.Itoa(k)}
		}
	}
	ss.site = s.cfg.Sites[s.siteZ.Uint64()]
	ss.page = int(s.pageZ.Uint64())
	return ss
}

// event fills ev with the session's current event.
func (s *sessionSim) event(ss *session, ev *ingest.Event) {
	*ev = ingest.Event{
		Time: ss.next, SiteID: ss.site, Node: s.cfg.Node, Region: s.cfg.Region,
		Path: pagePath(ss.page),
	}
	switch ss.stage {
	case 'p':
		ev.Kind, ev.Name = ingest.KindPageview, "pageview"
		if ss.entry {
			ev.ReferrerHost = ss.referrer
			ev.UTMSource, ev.UTMMedium, ev.UTMCampaign = ss.utm[0], ss.utm[1], ss.utm[2]
		}
	case 'e':
		ev.Kind, ev.Name = ingest.KindEngagement, "engagement"
		ev.EngagedMS = uint64(ss.engaged)
		ev.ScrollDepth = uint8(s.r.IntN(101))
	case 'c':
		c := genCustoms[s.r.IntN(len(genCustoms))]
		ev.Kind, ev.Name = ingest.KindCustom, c.name
		ev.Props = []ingest.Prop{{Key: c.key, Value: c.value}}
	}
	day := dayOfMS(ss.next)
	ev.VisitorHash = visitorHash(s.cfg.Seed, ss.visitor, day, ss.site)
	if ss.next%86_400_000 < 30*60_000 {
		ev.PrevVisitorHash = visitorHash(s.cfg.Seed, ss.visitor, day-1, ss.site)
	}
	s.attrs[ss.visitor].apply(ev, ss.bot)
}

// advance moves the session to its next event and reports whether there
// is one.
func (s *sessionSim) advance(ss *session) bool {
	r := s.r
	switch ss.stage {
	case 'p':
		ss.entry = false
		if ss.bot {
			break
		}
		// Visible time on the page: lognormal around 30 s, at most 30 min.
		ss.engaged = min(int64(math.Exp(math.Log(30_000)+r.NormFloat64())), 30*60_000)
		ss.custom = r.IntN(10) == 0
		if ss.custom {
			ss.stage, ss.next = 'c', ss.next+1+r.Int64N(ss.engaged+1)
			return true
		}
		if r.IntN(10) < 9 {
			ss.stage, ss.next = 'e', ss.next+ss.engaged
			return true
		}
	case 'c':
		ss.stage, ss.next = 'e', ss.next+1+r.Int64N(ss.engaged+1)
		return true
	}
	if ss.left == 0 {
		return false
	}
	ss.left--
	ss.stage = 'p'
	ss.next += 500 + r.Int64N(20_000)
	ss.page = int(s.pageZ.Uint64())
	return true
}

func pagePath(n int) string {
	if n == 0 {
		return "/"
	}
	return genPathRoots[n%len(genPathRoots)] + strconv.Itoa(n)
}

func referrer(r *rand.Rand, ws weighted[string]) string {
	ref := ws.pick(r)
	if ref == "*tail" {
		return "ref-" + strconv.Itoa(int(math.Exp(r.Float64()*math.Log(5000)))) + ".example"
	}
	return ref
}

// visitorAttrs is what a visitor always has: country, device, browser,
// OS and screen width.
type visitorAttrs struct {
	country, device, browser, os string
	width                        uint32
}

// makeVisitorAttrs draws the attributes of n visitors and then of
// botVisitors crawlers, all from seed.
func makeVisitorAttrs(seed uint64, n, bots int) []visitorAttrs {
	r := rand.New(rand.NewPCG(seed, 0x5157))
	out := make([]visitorAttrs, n+bots)
	for v := range out {
		a := &out[v]
		a.country = genCountries.pick(r)
		if v >= n {
			a.browser = "Googlebot"
			continue
		}
		a.device = genDevices.pick(r)
		a.browser = genBrowsers.pick(r)
		switch a.device {
		case "desktop":
			a.os = [...]string{"Windows", "Mac", "Linux"}[r.IntN(3)]
			a.width = [...]uint32{1920, 1440, 1366, 2560}[r.IntN(4)]
		case "mobile":
			a.os = [...]string{"Android", "iOS"}[r.IntN(2)]
			a.width = [...]uint32{390, 412, 375}[r.IntN(3)]
		default:
			a.os, a.width = "iPadOS", 810
		}
	}
	return out
}

// apply sets a's fields in ev; bots get the bot flag; clicks no screen.
func (a *visitorAttrs) apply(ev *ingest.Event, bot bool) {
	ev.Country, ev.Device, ev.Browser, ev.OS = a.country, a.device, a.browser, a.os
	if bot {
		ev.Flags |= ingest.FlagBot
	}
}

// genBots is the number of crawlers among the visitors.
const genBots = 200

// visitorHash stands in for the edge's keyed hash of (daily salt, site or
// code, address, user agent): stable for a visitor and an entity within a
// UTC day, different across days; never 0.
func visitorHash(seed uint64, v int, day int64, entity string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(entity))
	x := splitmix64(seed ^ splitmix64(uint64(v)+1) ^ splitmix64(uint64(day)<<20) ^ h.Sum64())
	if x == 0 {
		x = 1
	}
	return x
}

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func randomID(r *rand.Rand) (id [16]byte) {
	a, b := r.Uint64(), r.Uint64()
	for i := range 8 {
		id[i], id[8+i] = byte(a>>(8*i)), byte(b>>(8*i))
	}
	return id
}

func dayOfMS(ms int64) int64 { return ms / 86_400_000 }

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// trafficWeight is the relative traffic of minute m after start: a daily
// curve (lowest around 04:00 UTC, highest around 16:00) and quieter
// weekends.
func trafficWeight(start time.Time, m int) float64 {
	t := start.Add(time.Duration(m) * time.Minute)
	hour := float64(t.Hour()) + float64(t.Minute())/60
	w := 1 + 0.6*math.Sin(2*math.Pi*(hour-10)/24)
	if wd := t.Weekday(); wd == time.Saturday || wd == time.Sunday {
		w *= 0.7
	}
	return w
}

// cumulativeAlloc spreads a total over n slots in proportion to weights,
// exactly: slot k gets round(C(k+1)) - round(C(k)) of the running sum C.
type cumulativeAlloc struct {
	total  int
	cum    []float64 // cum[k] = sum of weights before slot k; cum[n] = sum of all
	weight float64
}

func newCumulativeAlloc(total, n int, weight func(k int) float64) cumulativeAlloc {
	cum := make([]float64, n+1)
	for k := range n {
		cum[k+1] = cum[k] + weight(k)
	}
	return cumulativeAlloc{total: total, cum: cum, weight: cum[n]}
}

func (c cumulativeAlloc) at(k int) int {
	if c.total == 0 || c.weight == 0 {
		return 0
	}
	f := float64(c.total) / c.weight
	return int(math.Round(c.cum[k+1]*f)) - int(math.Round(c.cum[k]*f))
}
