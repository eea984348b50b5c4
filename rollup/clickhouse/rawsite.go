package clickhouse

import (
	"context"
	"errors"
	"math"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/plausible"
	"github.com/waymark/waymark/rollup/query"
	"github.com/waymark/waymark/rollup/sources"
)

// Plausible's Stats API v2, and the native site questions the rows cannot
// answer (filters on several dimensions), go to rollup/plausible's engine
// over the raw events read from ClickHouse: one definition of every
// metric, the same as the embedded store's raw path. Each event carries its
// visit's id (sessions.go), so a visit past midnight UTC keeps one visitor.

func roundEven(v float64) float64 { return math.RoundToEven(v) }

// QueryV2 answers a parsed v2 query on site from the raw events, exactly
// (nothing estimated).
func (b *Backend) QueryV2(site string, q *plausible.Query) (*plausible.Result, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	ctx, cancel := b.ctx()
	defer cancel()
	res, err := plausible.Evaluate(q, rawSource{b, ctx}, b.v2Config())
	if err != nil {
		return nil, err
	}
	res.Estimated = []string{}
	return res, nil
}

// v2Config is the engine's configuration: Waymark's referrer names and
// channels (rollup/sources), as the embedded store's.
func (b *Backend) v2Config() plausible.Config {
	return plausible.Config{
		MaxEvents: b.cfg.MaxEvents,
		Source:    sources.Source,
		Channel: func(src, _, utmSource, utmMedium, utmCampaign string) string {
			return sources.Channel(src, sources.UTM{Source: utmSource, Medium: utmMedium, Campaign: utmCampaign}, "")
		},
	}
}

// rawSource feeds the engine a site's non-bot events.
type rawSource struct {
	b   *Backend
	ctx context.Context
}

// ScanSite delivers the site's non-bot events of [from, to), each under
// its visit's id: read from the UTC midnight before (less the gap), so
// that a visit going on past it is found.
func (s rawSource) ScanSite(site string, from, to int64, fn func(*plausible.Event) error) error {
	dayStart := floorDiv(from, 24*msPerHour) * 24 * msPerHour
	evs, err := s.b.c.loadSiteEvents(s.ctx, site, min(from-msPerHour, dayStart-visitGapMS), to, s.b.cfg.MaxEvents, allCols)
	if errors.Is(err, errTooManyEvents) {
		return &plausible.ScanLimitError{Limit: s.b.cfg.MaxEvents}
	}
	if err != nil {
		return err
	}
	d := sessionize(evs)
	var pe plausible.Event
	i, j := d.span(from, to)
	for k := i; k < j; k++ {
		ev := &d.evs[k]
		toPlausible(ev, &pe)
		if vi := d.of[k]; vi >= 0 {
			pe.Hash = d.visits[vi].id
		}
		if err := fn(&pe); err != nil {
			return err
		}
	}
	return nil
}

// toPlausible converts a stored event for the engine.
func toPlausible(ev *storedEvent, pe *plausible.Event) {
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

// rawSite answers a native site question from the raw events
// (query.RawSite over this backend's raw events, as the embedded store's
// raw path does).
func (b *Backend) rawSite(ctx context.Context, site string, r query.Range, g query.Granularity, dimension string, filters []query.DimFilter) ([]query.RawRow, error) {
	return query.RawSite(site, r, g, dimension, filters, b.cfg.Now(), rawSource{b, ctx}, b.v2Config())
}
