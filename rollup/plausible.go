package rollup

import (
	"strconv"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/plausible"
	"github.com/waymark/waymark/rollup/sources"
)

// maxRawDayEvents bounds the raw events (of every site) a v2 query may
// decode to find one site's: the raw engine reads whole days of blocks.
const maxRawDayEvents = 50_000_000

// SiteStatsStart is the start of the oldest held day with events of
// site (query.Backend).
func (a *Aggregator) SiteStatsStart(site string) (time.Time, error) {
	if err := a.enter(); err != nil {
		return time.Time{}, err
	}
	defer a.leave()
	return a.firstDay(classSite, site), nil
}

// QueryV2 answers a parsed v2 query (query.Backend): from the rollups when
// they hold the answer exactly (v2fast.go), otherwise from the raw events
// (exact, nothing estimated).
func (a *Aggregator) QueryV2(site string, q *plausible.Query) (*plausible.Result, error) {
	if err := a.enter(); err != nil {
		return nil, err
	}
	defer a.leave()
	res, ok, err := a.v2Fast(q, site)
	if err == nil && !ok {
		if res, err = plausible.Evaluate(q, rawSource{a}, a.v2Config()); err == nil {
			res.Estimated = []string{} // exact, from the raw events
		}
	}
	return res, err
}

// v2Config is the raw engine's configuration: Waymark's referrer names
// and channels (rollup/sources).
func (a *Aggregator) v2Config() plausible.Config {
	return plausible.Config{
		Source: sources.Source,
		Channel: func(src, _, utmSource, utmMedium, utmCampaign string) string {
			return sources.Channel(src, sources.UTM{Source: utmSource, Medium: utmMedium, Campaign: utmCampaign}, "")
		},
	}
}

// firstDay is the start of the oldest held day with events of a counter
// class and name, or the zero time.
func (a *Aggregator) firstDay(class byte, name string) time.Time {
	a.mu.Lock()
	days := make([]day, 0, len(a.days))
	for d := range a.days {
		days = append(days, d)
	}
	a.mu.Unlock()
	first := day(^uint32(0))
	var c counters
	for _, d := range days {
		if d >= first {
			continue
		}
		if err := getCounters(a.db, appendDayCounterKey(nil, d, class, name), &c); err == nil && c[0] > 0 {
			first = d
		}
	}
	if first == day(^uint32(0)) {
		return time.Time{}
	}
	return first.start()
}

// rawSource feeds the raw engine a site's events from the raw blocks.
type rawSource struct{ a *Aggregator }

// ScanSite delivers the site's non-bot events of [from, to). Events of a
// visit that went on past midnight UTC carry the visit's id (as the stored
// events do once their salts are gone, see scrubLinks).
func (s rawSource) ScanSite(siteID string, from, to int64, fn func(*plausible.Event) error) error {
	a := s.a
	d0, d1 := dayOf(from), dayOf(max(to-1, from))+1
	a.mu.Lock()
	var total uint64
	for d := d0; d < d1; d++ {
		total += a.days[d].events
	}
	a.mu.Unlock()
	if total > maxRawDayEvents {
		return errRawTooBig(total)
	}
	var pe plausible.Event
	var ferr error
	err := scanEvents(a.db, d0, d1, func(ev *ingest.Event) bool {
		if ev.SiteID != siteID || ev.Kind == ingest.KindClick || ev.Bot() || ev.Time < from || ev.Time >= to {
			return true
		}
		toPlausible(ev, &pe)
		pe.Hash = a.visitors.visitID(ev)
		ferr = fn(&pe)
		return ferr == nil
	})
	if err == nil {
		err = ferr
	}
	return err
}

func errRawTooBig(n uint64) error {
	return &plausible.QueryError{Message: "The query needs " + strconv.FormatUint(n, 10) +
		" raw events of the days it covers (at most " + strconv.Itoa(maxRawDayEvents) + "); narrow the date range."}
}

// toPlausible converts a stored event for the raw engine; strings are
// shared with ev, whose decode made them.
func toPlausible(ev *ingest.Event, pe *plausible.Event) {
	props := pe.Props[:0]
	*pe = plausible.Event{
		Time: ev.Time, Name: ev.Name, Path: ev.Path, Hash: ev.VisitorHash,
		ReferrerHost: ev.ReferrerHost, UTMSource: ev.UTMSource, UTMMedium: ev.UTMMedium,
		UTMCampaign: ev.UTMCampaign, UTMTerm: ev.UTMTerm, UTMContent: ev.UTMContent,
		Country: ev.Country, Region: ev.Subdivision, City: ev.City,
		Device: ev.Device, Browser: ev.Browser, BrowserVersion: ev.BrowserVersion,
		OS: ev.OS, OSVersion: ev.OSVersion,
		EngagedMS: uint32(min(ev.EngagedMS, 1<<32-1)), ScrollDepth: ev.ScrollDepth,
		Interactive: ev.Flags&ingest.FlagNonInteractive == 0,
	}
	switch ev.Kind {
	case ingest.KindPageview:
		pe.Kind = plausible.Pageview
	case ingest.KindEngagement:
		pe.Kind = plausible.Engagement
	default:
		pe.Kind = plausible.Custom
	}
	for _, p := range ev.Props {
		props = append(props, plausible.Prop{Key: p.Key, Value: p.Value})
	}
	pe.Props = props
}
