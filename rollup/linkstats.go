package rollup

import (
	"fmt"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
)

// estimatedUniques is the Estimated list of every answer with uniques.
var estimatedUniques = []string{"unique_visitors"}

// linkDims maps the API's link dimension names to rollup dimensions.
var linkDims = map[string]byte{
	"country": dimCountry, "device": dimDevice, "browser": dimBrowser, "os": dimOS,
	"referrer": dimReferrer, "utm_source": dimUTMSource, "utm_medium": dimUTMMedium,
	"utm_campaign": dimUTMCampaign, "rule": dimRule,
}

// LinkStats returns a link's totals over r and its series by g. Clicks
// are exact; unique visitors are merged HyperLogLog sketches.
func (a *Aggregator) LinkStats(code string, r query.Range, g query.Granularity) (*query.LinkStats, error) {
	if err := query.CheckRange(r); err != nil {
		return nil, err
	}
	buckets, err := r.Buckets(g)
	if err != nil {
		return nil, err
	}
	if err := a.enter(); err != nil {
		return nil, err
	}
	defer a.leave()
	out := &query.LinkStats{Code: code, From: r.From, To: r.To, Timezone: r.Location().String(), Granularity: g,
		Series: make([]query.LinkPoint, 0, len(buckets)), Estimated: estimatedUniques}
	rows, err := a.rows(kindLink, code, dimTotal, r, false, nil)
	if err != nil {
		return nil, err
	}
	if c := rows[""]; c != nil {
		out.Totals.Clicks, out.Totals.BotClicks = c[fCount], c[fBots]
	}
	sks, err := a.setsOf(kindLink, code, dimTotal, r, []string{""})
	if err != nil {
		return nil, err
	}
	out.Totals.UniqueVisitors = estimateOf(sks[""])
	if out.DroppedEvents, err = a.droppedIn(ingest.ScopeLink, code, r); err != nil {
		return nil, err
	}
	for _, b := range buckets {
		// The first and last buckets are clipped to the range.
		if b.From.Before(r.From) {
			b.From = r.From
		}
		if b.To.After(r.To) {
			b.To = r.To
		}
		p := query.LinkPoint{T: b.From}
		rows, err := a.rows(kindLink, code, dimTotal, b, false, nil)
		if err != nil {
			return nil, err
		}
		if c := rows[""]; c != nil {
			p.Clicks = c[fCount]
		}
		if p.Clicks > 0 {
			sks, err := a.setsOf(kindLink, code, dimTotal, b, []string{""})
			if err != nil {
				return nil, err
			}
			p.UniqueVisitors = estimateOf(sks[""])
		}
		out.Series = append(out.Series, p)
	}
	return out, nil
}

// LinkBreakdown returns the top limit values of a dimension (country,
// device, browser, os, referrer, utm_source, utm_medium, utm_campaign,
// rule) by clicks over r.
func (a *Aggregator) LinkBreakdown(code, dimension string, r query.Range, limit int) (*query.LinkBreakdown, error) {
	dim, ok := linkDims[dimension]
	if !ok {
		return nil, fmt.Errorf("%w: dimension %q", query.ErrUnsupportedQuery, dimension)
	}
	if err := query.CheckRange(r); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 10
	}
	if err := a.enter(); err != nil {
		return nil, err
	}
	defer a.leave()
	out := &query.LinkBreakdown{Dimension: dimension, Results: []query.LinkBreakdownRow{}, Estimated: estimatedUniques}
	totals, err := a.rows(kindLink, code, dimTotal, r, false, nil)
	if err != nil {
		return nil, err
	}
	if c := totals[""]; c != nil {
		out.Total = c[fCount]
	}
	if out.DroppedEvents, err = a.droppedIn(ingest.ScopeLink, code, r); err != nil {
		return nil, err
	}
	rows, err := a.rows(kindLink, code, dim, r, false, nil)
	if err != nil {
		return nil, err
	}
	for v, c := range rows {
		out.Results = append(out.Results, query.LinkBreakdownRow{Value: v, Clicks: c[fCount]})
	}
	sortByCount(out.Results, func(x *query.LinkBreakdownRow) int64 { return x.Clicks }, func(x *query.LinkBreakdownRow) string { return x.Value })
	if len(out.Results) > limit {
		for _, x := range out.Results[limit:] {
			out.Other += x.Clicks
		}
		out.Results = out.Results[:limit]
	}
	keep := make([]string, 0, len(out.Results))
	for _, x := range out.Results {
		keep = append(keep, x.Value)
	}
	sks, err := a.setsOf(kindLink, code, dim, r, keep)
	if err != nil {
		return nil, err
	}
	for i := range out.Results {
		x := &out.Results[i]
		x.UniqueVisitors = estimateOf(sks[x.Value])
		x.Share = round4(ratio(x.Clicks, out.Total))
	}
	return out, nil
}

func round4(v float64) float64 { return float64(int64(v*10000+0.5)) / 10000 }

// LinkRealtime counts the link's non-bot clicks of the last minute, five
// minutes and hour, and lists the last n of them.
func (a *Aggregator) LinkRealtime(code string, n int) (*query.LinkRealtime, error) {
	if n <= 0 || n > 100 {
		n = 20
	}
	if err := a.enter(); err != nil {
		return nil, err
	}
	defer a.leave()
	now := a.cfg.Now()
	nowMS := now.UnixMilli()
	out := &query.LinkRealtime{Recent: []query.RecentClick{}}
	var recent []query.RecentClick
	err := a.realtimeScan(now.Add(-time.Hour), func(ev *ingest.Event) error {
		t := ev.Time
		if t > nowMS {
			return nil
		}
		if ev.Kind != ingest.KindClick || ev.Code != code || ev.Bot() {
			return nil
		}
		out.LastHour++
		if t >= nowMS-5*60_000 {
			out.Last5Minutes++
		}
		if t >= nowMS-60_000 {
			out.LastMinute++
		}
		recent = append(recent, query.RecentClick{Time: time.UnixMilli(t).UTC(), Country: ev.Country, Device: ev.Device, Referrer: ev.ReferrerHost})
		if len(recent) > 2*n {
			recent = append(recent[:0], recent[len(recent)-n:]...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot read realtime clicks: %w", err)
	}
	for i := len(recent) - 1; i >= 0 && len(out.Recent) < n; i-- {
		out.Recent = append(out.Recent, recent[i])
	}
	return out, nil
}
