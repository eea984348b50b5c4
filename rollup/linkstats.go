package rollup

import (
	"fmt"
	"time"

	"github.com/waymark/waymark/ingest"
)

// LinkTotals are a link's numbers over a range.
type LinkTotals struct {
	Clicks         int64  `json:"clicks"`
	UniqueVisitors uint64 `json:"unique_visitors"` // estimate
	BotClicks      int64  `json:"bot_clicks"`
}

// LinkPoint is one bucket of a link's series; T is its start in the
// query's zone.
type LinkPoint struct {
	T              time.Time `json:"t"`
	Clicks         int64     `json:"clicks"`
	UniqueVisitors uint64    `json:"unique_visitors"` // estimate
}

// LinkStats answers GET /v1/links/{code}/stats.
type LinkStats struct {
	Code        string      `json:"code"`
	From        time.Time   `json:"from"`
	To          time.Time   `json:"to"`
	Timezone    string      `json:"timezone"`
	Granularity Granularity `json:"granularity"`
	Totals      LinkTotals  `json:"totals"`
	Series      []LinkPoint `json:"series"`
	// Estimated names the fields that are HyperLogLog estimates.
	Estimated []string `json:"estimated"`
	// DroppedEvents is how many clicks of the link in the hours the range
	// touches the edges dropped before writing them (dropped.go): the
	// numbers above are short by that much.
	DroppedEvents int64 `json:"dropped_events"`
}

// estimatedUniques is the Estimated list of every answer with uniques.
var estimatedUniques = []string{"unique_visitors"}

// linkDims maps the API's link dimension names to rollup dimensions.
var linkDims = map[string]byte{
	"country": dimCountry, "device": dimDevice, "browser": dimBrowser, "os": dimOS,
	"referrer": dimReferrer, "utm_source": dimUTMSource, "utm_medium": dimUTMMedium,
	"utm_campaign": dimUTMCampaign,
}

// LinkStats returns a link's totals over r and its series by g. Clicks
// are exact; unique visitors are merged HyperLogLog sketches.
func (a *Aggregator) LinkStats(code string, r Range, g Granularity) (*LinkStats, error) {
	if err := checkRange(r); err != nil {
		return nil, err
	}
	buckets, err := r.buckets(g)
	if err != nil {
		return nil, err
	}
	if err := a.enter(); err != nil {
		return nil, err
	}
	defer a.leave()
	out := &LinkStats{Code: code, From: r.From, To: r.To, Timezone: r.loc().String(), Granularity: g,
		Series: make([]LinkPoint, 0, len(buckets)), Estimated: estimatedUniques}
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
		p := LinkPoint{T: b.From}
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

// LinkBreakdownRow is one value of a link breakdown.
type LinkBreakdownRow struct {
	Value          string  `json:"value"` // "" is none (direct, unknown)
	Clicks         int64   `json:"clicks"`
	UniqueVisitors uint64  `json:"unique_visitors"` // estimate
	Share          float64 `json:"share"`           // of all clicks in the range, 0-1
}

// LinkBreakdown answers GET /v1/links/{code}/stats/breakdown.
type LinkBreakdown struct {
	Dimension string             `json:"dimension"`
	Total     int64              `json:"total"`
	Results   []LinkBreakdownRow `json:"results"`
	// Other is the clicks of the values past the limit.
	Other         int64    `json:"other"`
	Estimated     []string `json:"estimated"`
	DroppedEvents int64    `json:"dropped_events"` // as in LinkStats
}

// LinkBreakdown returns the top limit values of a dimension (country,
// device, browser, os, referrer, utm_source, utm_medium, utm_campaign) by
// clicks over r.
func (a *Aggregator) LinkBreakdown(code, dimension string, r Range, limit int) (*LinkBreakdown, error) {
	dim, ok := linkDims[dimension]
	if !ok {
		return nil, fmt.Errorf("%w: dimension %q", ErrUnsupportedQuery, dimension)
	}
	if err := checkRange(r); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 10
	}
	if err := a.enter(); err != nil {
		return nil, err
	}
	defer a.leave()
	out := &LinkBreakdown{Dimension: dimension, Results: []LinkBreakdownRow{}, Estimated: estimatedUniques}
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
		out.Results = append(out.Results, LinkBreakdownRow{Value: v, Clicks: c[fCount]})
	}
	sortByCount(out.Results, func(x *LinkBreakdownRow) int64 { return x.Clicks }, func(x *LinkBreakdownRow) string { return x.Value })
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

// RecentClick is one click in a link's realtime answer.
type RecentClick struct {
	Time     time.Time `json:"time"`
	Country  string    `json:"country"`
	Device   string    `json:"device"`
	Referrer string    `json:"referrer"`
}

// LinkRealtime answers GET /v1/links/{code}/stats/realtime: non-bot clicks
// in the windows ending now, straight from the raw events.
type LinkRealtime struct {
	LastMinute   int64         `json:"last_minute"`
	Last5Minutes int64         `json:"last_5_minutes"`
	LastHour     int64         `json:"last_hour"`
	Recent       []RecentClick `json:"recent"` // newest first
}

// LinkRealtime counts the link's non-bot clicks of the last minute, five
// minutes and hour, and lists the last n of them.
func (a *Aggregator) LinkRealtime(code string, n int) (*LinkRealtime, error) {
	if n <= 0 || n > 100 {
		n = 20
	}
	if err := a.enter(); err != nil {
		return nil, err
	}
	defer a.leave()
	now := a.cfg.Now()
	nowMS := now.UnixMilli()
	out := &LinkRealtime{Recent: []RecentClick{}}
	var recent []RecentClick
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
		recent = append(recent, RecentClick{Time: time.UnixMilli(t).UTC(), Country: ev.Country, Device: ev.Device, Referrer: ev.ReferrerHost})
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
