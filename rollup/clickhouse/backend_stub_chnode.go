package clickhouse

// STUB for the chnode branch only: the lead deletes this file when the
// chbackend branch's backend.go (the real Backend) is merged. It has the
// names the node wires against (Backend, NewBackend, BackendConfig,
// Backend.StoreSegment) and answers only what query.go answers: a link's
// daily UTC series; every other question is query.ErrUnsupportedQuery.

import (
	"context"
	"fmt"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/plausible"
	"github.com/waymark/waymark/rollup/query"
	"github.com/waymark/waymark/store"
)

// BackendConfig configures a Backend (stub: nothing yet).
type BackendConfig struct{}

// Backend is the ClickHouse analytics backend (stub).
type Backend struct {
	c *Client
}

var _ query.Backend = (*Backend)(nil)

// NewBackend returns the backend over c.
func NewBackend(c *Client, cfg BackendConfig) *Backend { return &Backend{c: c} }

// StoreSegment stores one shipped segment exactly once (Client.StoreSegment).
func (b *Backend) StoreSegment(ctx context.Context, raw []byte) (StoreResult, error) {
	return b.c.StoreSegment(ctx, raw)
}

func unsupported(what string) error {
	return fmt.Errorf("%w: %s is not answered from clickhouse yet", query.ErrUnsupportedQuery, what)
}

// LinkStats answers a day series over whole UTC days only.
func (b *Backend) LinkStats(code string, r query.Range, g query.Granularity) (*query.LinkStats, error) {
	if g != query.Day || r.Location() != time.UTC || !isMidnight(r.From) || !isMidnight(r.To) {
		return nil, unsupported("a link series other than days in UTC")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := b.c.LinkStats(ctx, code, r.From, r.To)
	if err != nil {
		return nil, err
	}
	out := &query.LinkStats{Code: code, From: r.From, To: r.To, Timezone: "UTC", Granularity: g,
		Totals:    query.LinkTotals{Clicks: st.Totals.Clicks, UniqueVisitors: st.Totals.Visitors, BotClicks: st.Totals.BotClicks},
		Series:    []query.LinkPoint{},
		Estimated: []string{"unique_visitors"}}
	for _, d := range st.Series {
		t, err := time.Parse(time.DateOnly, d.Date)
		if err != nil {
			return nil, fmt.Errorf("cannot read day %q: %w", d.Date, err)
		}
		out.Series = append(out.Series, query.LinkPoint{T: t, Clicks: d.Clicks, UniqueVisitors: d.Visitors})
	}
	return out, nil
}

func (b *Backend) LinkBreakdown(string, string, query.Range, int) (*query.LinkBreakdown, error) {
	return nil, unsupported("link breakdown")
}
func (b *Backend) LinkRealtime(string, int) (*query.LinkRealtime, error) {
	return nil, unsupported("link realtime")
}
func (b *Backend) LinkOverview(string, *time.Location) (*query.LinkOverview, error) {
	return nil, unsupported("link overview")
}
func (b *Backend) SiteAggregate(string, query.Range, []query.DimFilter) (query.SiteMetrics, error) {
	return query.SiteMetrics{}, unsupported("site aggregate")
}
func (b *Backend) SiteTimeseries(string, query.Range, query.Granularity, []query.DimFilter) ([]query.SitePoint, error) {
	return nil, unsupported("site timeseries")
}
func (b *Backend) SiteBreakdown(string, string, query.Range, int, []query.DimFilter) (*query.SiteBreakdown, error) {
	return nil, unsupported("site breakdown")
}
func (b *Backend) SiteRealtime(string) (*query.SiteRealtime, error) {
	return nil, unsupported("site realtime")
}
func (b *Backend) SiteHeatmap(string, query.Range) (*query.Heatmap, error) {
	return nil, unsupported("site heatmap")
}
func (b *Backend) SiteGoalStats(string, []store.Goal, query.Range) (*query.SiteGoals, error) {
	return nil, unsupported("site goals")
}
func (b *Backend) SiteStatsStart(string) (time.Time, error) {
	return time.Time{}, unsupported("site stats start")
}
func (b *Backend) QueryV2(string, *plausible.Query) (*plausible.Result, error) {
	return nil, unsupported("the v2 query")
}
func (b *Backend) DroppedEvents(ingest.Scope, string, query.Range) (int64, error) {
	return 0, unsupported("dropped events")
}
