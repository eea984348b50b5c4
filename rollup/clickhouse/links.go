package clickhouse

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
)

// Link questions are SQL over the raw clicks: counts with countIf (exact),
// unique visitors with uniqCombinedIf (an estimate, DESIGN.md states its
// bound). Every read is FROM events FINAL.

var linkEstimated = []string{"unique_visitors"}

// linkColumns maps a link breakdown's dimension to its events column.
var linkColumns = map[string]string{
	"country": "country", "device": "device", "browser": "browser", "os": "os",
	"referrer": "referrer", "utm_source": "utm_source", "utm_medium": "utm_medium",
	"utm_campaign": "utm_campaign",
}

func linkWhere(code string) string {
	return "site = '' AND code = " + String(code) + " AND " + kindClick
}

// evMS is an event's time in Unix ms.
const evMS = "(toUInt64(time) * 1000 + ms)"

// bucketExpr numbers the bucket (1-based) whose start, in Unix seconds,
// is the last of starts at or before the event: arrayCount over the
// sorted starts works on 18.16 and current releases alike.
func bucketExpr(startsMS []int64) string {
	var b strings.Builder
	b.WriteString("arrayCount(s -> s <= toUInt32(time), [")
	for i, s := range startsMS {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("toUInt32(" + strconv.FormatInt(s/1000, 10) + ")")
	}
	b.WriteString("])")
	return b.String()
}

// clippedBuckets are r's buckets by g, clipped to r, as whole UTC hours
// (ms): starts, and the end of the last.
func clippedBuckets(r query.Range, g query.Granularity) ([]query.Range, []int64, int64, error) {
	buckets, err := r.Buckets(g)
	if err != nil {
		return nil, nil, 0, err
	}
	starts := make([]int64, len(buckets))
	for i := range buckets {
		if buckets[i].From.Before(r.From) {
			buckets[i].From = r.From
		}
		if buckets[i].To.After(r.To) {
			buckets[i].To = r.To
		}
		starts[i] = floorHour(buckets[i].From)
	}
	return buckets, starts, ceilHour(r.To), nil
}

// LinkStats is a link's totals over r and its series by g.
func (b *Backend) LinkStats(code string, r query.Range, g query.Granularity) (*query.LinkStats, error) {
	if err := query.CheckRange(r); err != nil {
		return nil, err
	}
	buckets, starts, end, err := clippedBuckets(r, g)
	if err != nil {
		return nil, err
	}
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	ctx, cancel := b.ctx()
	defer cancel()
	out := &query.LinkStats{Code: code, From: r.From, To: r.To, Timezone: r.Location().String(), Granularity: g,
		Series: make([]query.LinkPoint, len(buckets)), Estimated: linkEstimated}
	for i := range buckets {
		out.Series[i].T = buckets[i].From
	}
	// One scan: the buckets cover exactly the range at whole UTC hours,
	// so WITH TOTALS is the range's totals (its visitors the range's
	// distinct ones, not the buckets' sum).
	// From link rows up to the horizon where they are clean (one
	// statement all the same).
	cols := "countIf(" + notBot + "), countIf(" + isBot + "), uniqCombinedIf(visitor, " + notBot + ")"
	sql := "SELECT " + bucketExpr(starts) + " AS bk, " + cols + " FROM events FINAL WHERE " +
		linkWhere(code) + " AND " + timeIn(starts[0], end) + " GROUP BY bk WITH TOTALS"
	dropped := b.droppedAtOnce(ctx, code, r)
	p, err := b.linkPlan(ctx, starts[0], end)
	if err != nil {
		return nil, err
	}
	if p != nil {
		b.c.m.linkFast.Inc()
		if err := b.linkStatsFromRows(ctx, p, code, starts, end, out); err != nil {
			return nil, err
		}
		if out.DroppedEvents, err = dropped(); err != nil {
			return nil, err
		}
		return out, nil
	}
	b.c.m.linkRaw.Inc()
	res, err := b.c.Query(ctx, sql)
	if err != nil {
		return nil, fmt.Errorf("cannot read link stats: %w", err)
	}
	scan := func(raw []json.RawMessage) (n, bots int64, u uint64, err error) {
		row := rawRow(raw)
		var e [3]error
		n, e[0] = row[0].int()
		bots, e[1] = row[1].int()
		u, e[2] = row[2].uint()
		return n, bots, u, firstErr(e[:])
	}
	for _, raw := range res.Data {
		k, err := rawRow(raw)[0].int()
		if err != nil {
			return nil, fmt.Errorf("cannot read link series: %w", err)
		}
		n, _, u, err := scan(raw[1:])
		if err != nil {
			return nil, fmt.Errorf("cannot read link series: %w", err)
		}
		if k >= 1 && int(k) <= len(out.Series) && n > 0 {
			out.Series[k-1].Clicks, out.Series[k-1].UniqueVisitors = n, u
		}
	}
	if len(res.Totals) == 4 {
		if out.Totals.Clicks, out.Totals.BotClicks, out.Totals.UniqueVisitors, err = scan(res.Totals[1:]); err != nil {
			return nil, fmt.Errorf("cannot read link totals: %w", err)
		}
	}
	if out.DroppedEvents, err = dropped(); err != nil {
		return nil, err
	}
	return out, nil
}

// droppedAtOnce starts reading a link's dropped events over r beside
// the question's other reads; the function returned waits for it.
func (b *Backend) droppedAtOnce(ctx context.Context, code string, r query.Range) func() (int64, error) {
	var n int64
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		n, err = b.dropped(ctx, ingest.ScopeLink, code, r)
	}()
	return func() (int64, error) {
		<-done
		return n, err
	}
}

func firstErr(errs []error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// LinkBreakdown is the top limit values of a link dimension by clicks.
func (b *Backend) LinkBreakdown(code, dimension string, r query.Range, limit int) (*query.LinkBreakdown, error) {
	col, ok := linkColumns[dimension]
	if !ok {
		return nil, fmt.Errorf("%w: dimension %q", query.ErrUnsupportedQuery, dimension)
	}
	if err := query.CheckRange(r); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 10
	}
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	ctx, cancel := b.ctx()
	defer cancel()
	out := &query.LinkBreakdown{Dimension: dimension, Results: []query.LinkBreakdownRow{}, Estimated: linkEstimated}
	lo, hi := hourBounds(r)
	sql := "SELECT " + col + ", count(), uniqCombined(visitor) FROM events FINAL WHERE " +
		linkWhere(code) + " AND " + notBot + " AND " + timeIn(lo, hi) + " GROUP BY " + col
	dropped := b.droppedAtOnce(ctx, code, r)
	p, err := b.linkPlan(ctx, lo, hi)
	if err != nil {
		return nil, err
	}
	var res *Result
	if p != nil {
		b.c.m.linkFast.Inc()
		if out.Results, err = b.linkBreakdownFromRows(ctx, p, code, dimension, col, lo, hi); err != nil {
			return nil, err
		}
		for _, x := range out.Results {
			out.Total += x.Clicks
		}
		res = &Result{}
	} else {
		b.c.m.linkRaw.Inc()
		if res, err = b.c.Query(ctx, sql); err != nil {
			return nil, fmt.Errorf("cannot read link breakdown: %w", err)
		}
	}
	for _, raw := range res.Data {
		row := rawRow(raw)
		v, err1 := row[0].str()
		n, err2 := row[1].int()
		u, err3 := row[2].uint()
		if err := firstErr([]error{err1, err2, err3}); err != nil {
			return nil, fmt.Errorf("cannot read link breakdown: %w", err)
		}
		out.Results = append(out.Results, query.LinkBreakdownRow{Value: v, Clicks: n, UniqueVisitors: u})
		out.Total += n
	}
	slices.SortFunc(out.Results, func(x, y query.LinkBreakdownRow) int {
		if c := cmp.Compare(y.Clicks, x.Clicks); c != 0 {
			return c
		}
		return strings.Compare(x.Value, y.Value)
	})
	if len(out.Results) > limit {
		for _, x := range out.Results[limit:] {
			out.Other += x.Clicks
		}
		out.Results = out.Results[:limit]
	}
	for i := range out.Results {
		out.Results[i].Share = round4(ratio(out.Results[i].Clicks, out.Total))
	}
	if out.DroppedEvents, err = dropped(); err != nil {
		return nil, err
	}
	return out, nil
}

// LinkRealtime counts the link's non-bot clicks of the last minute, five
// minutes and hour, and lists the newest n.
func (b *Backend) LinkRealtime(code string, n int) (*query.LinkRealtime, error) {
	if n <= 0 || n > 100 {
		n = 20
	}
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	ctx, cancel := b.ctx()
	defer cancel()
	now := b.cfg.Now().UnixMilli()
	out := &query.LinkRealtime{Recent: []query.RecentClick{}}
	where := linkWhere(code) + " AND " + notBot + " AND " + timeIn(floorDiv(now-3600_000, 1000)*1000, now+1000) +
		fmt.Sprintf(" AND %s >= %d AND %s <= %d", evMS, now-3600_000, evMS, now)
	res, err := b.c.Query(ctx, fmt.Sprintf("SELECT count(), countIf(%s >= %d), countIf(%s >= %d) FROM events FINAL WHERE %s",
		evMS, now-5*60_000, evMS, now-60_000, where))
	if err != nil {
		return nil, fmt.Errorf("cannot read realtime clicks: %w", err)
	}
	if len(res.Data) == 1 {
		row := rawRow(res.Data[0])
		var e [3]error
		out.LastHour, e[0] = row[0].int()
		out.Last5Minutes, e[1] = row[1].int()
		out.LastMinute, e[2] = row[2].int()
		if err := firstErr(e[:]); err != nil {
			return nil, fmt.Errorf("cannot read realtime clicks: %w", err)
		}
	}
	res, err = b.c.Query(ctx, fmt.Sprintf("SELECT %s AS t, country, device, referrer FROM events FINAL WHERE %s ORDER BY t DESC, id DESC LIMIT %d", evMS, where, n))
	if err != nil {
		return nil, fmt.Errorf("cannot read realtime clicks: %w", err)
	}
	for _, raw := range res.Data {
		row := rawRow(raw)
		t, err1 := row[0].int()
		c, err2 := row[1].str()
		d, err3 := row[2].str()
		ref, err4 := row[3].str()
		if err := firstErr([]error{err1, err2, err3, err4}); err != nil {
			return nil, fmt.Errorf("cannot read realtime clicks: %w", err)
		}
		out.Recent = append(out.Recent, query.RecentClick{Time: time.UnixMilli(t).UTC(), Country: c, Device: d, Referrer: ref})
	}
	return out, nil
}

var overviewEstimated = []string{"today.unique_visitors", "yesterday.unique_visitors", "last_7_days.unique_visitors",
	"previous_7_days.unique_visitors", "last_30_days.unique_visitors"}

// peakHours is how far back the peak hour looks: the embedded hour tier.
const peakHours = 30 * 24

// LinkOverview is a link's overview at the backend's now, days in loc.
func (b *Backend) LinkOverview(code string, loc *time.Location) (*query.LinkOverview, error) {
	if loc == nil {
		loc = time.UTC
	}
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	ctx, cancel := b.ctx()
	defer cancel()
	now := b.cfg.Now()
	local := now.In(loc)
	midnight := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, loc)
	daysBack := func(n int) time.Time { return midnight.AddDate(0, 0, -n) }
	out := &query.LinkOverview{Code: code, Timezone: loc.String(), Now: now, Estimated: overviewEstimated}
	for _, w := range []struct {
		dst      *query.OverviewWindow
		from, to time.Time
	}{
		{&out.Today, midnight, now},
		{&out.Yesterday, daysBack(1), midnight},
		{&out.Last7Days, daysBack(7), midnight},
		{&out.Previous7Days, daysBack(14), daysBack(7)},
		{&out.Last30Days, daysBack(30), midnight},
	} {
		w.dst.From, w.dst.To = w.from, w.to
		if !w.to.After(w.from) {
			continue
		}
		lo, hi := hourBounds(query.Range{From: w.from, To: w.to})
		res, err := b.c.Query(ctx, "SELECT count(), uniqCombined(visitor) FROM events FINAL WHERE "+
			linkWhere(code)+" AND "+notBot+" AND "+timeIn(lo, hi))
		if err != nil {
			return nil, fmt.Errorf("cannot read link overview: %w", err)
		}
		if len(res.Data) == 1 {
			row := rawRow(res.Data[0])
			n, err1 := row[0].int()
			u, err2 := row[1].uint()
			if err := firstErr([]error{err1, err2}); err != nil {
				return nil, fmt.Errorf("cannot read link overview: %w", err)
			}
			w.dst.Clicks = n
			if n > 0 {
				w.dst.UniqueVisitors = u
			}
		}
	}
	var err error
	if out.AllTimeClicks, err = b.allTimeClicks(ctx, code); err != nil {
		return nil, err
	}
	out.DailyGrowth = growth(out.Today.Clicks, out.Yesterday.Clicks)
	out.WeeklyGrowth = growth(out.Last7Days.Clicks, out.Previous7Days.Clicks)

	h1 := floorDiv(now.UnixMilli(), msPerHour) + 1
	h0 := max(h1-peakHours, 0)
	res, err := b.c.Query(ctx, fmt.Sprintf("SELECT intDiv(toUInt32(time), 3600) AS h, count(), max(%s) FROM events FINAL WHERE %s AND %s AND %s AND %s <= %d GROUP BY h",
		evMS, linkWhere(code), notBot, timeIn(h0*msPerHour, h1*msPerHour), evMS, now.UnixMilli()))
	if err != nil {
		return nil, fmt.Errorf("cannot read link hours: %w", err)
	}
	var byHour [24]int64
	var total, last int64 = 0, -1
	for _, raw := range res.Data {
		row := rawRow(raw)
		h, err1 := row[0].int()
		n, err2 := row[1].int()
		t, err3 := row[2].int()
		if err := firstErr([]error{err1, err2, err3}); err != nil {
			return nil, fmt.Errorf("cannot read link hours: %w", err)
		}
		byHour[time.UnixMilli(h*msPerHour).In(loc).Hour()] += n
		total += n
		last = max(last, t)
	}
	if total > 0 {
		best := 0
		for h := 1; h < 24; h++ {
			if byHour[h] > byHour[best] {
				best = h
			}
		}
		out.PeakHour = &query.PeakHour{Hour: best, Clicks: byHour[best],
			From: time.UnixMilli(h0 * msPerHour).In(loc), To: time.UnixMilli(h1 * msPerHour).In(loc)}
	}
	if last >= 0 {
		t := time.UnixMilli(last).UTC()
		out.LastClick = &t
	}
	return out, nil
}

// allTimeClicks is a link's non-bot clicks held, plus those of the raw
// days retention dropped (retired_clicks).
func (b *Backend) allTimeClicks(ctx context.Context, code string) (int64, error) {
	res, err := b.c.Query(ctx, "SELECT (SELECT count() FROM events FINAL WHERE "+linkWhere(code)+" AND "+notBot+
		") + (SELECT sum(clicks) FROM retired_clicks FINAL WHERE code = "+String(code)+")")
	if err != nil {
		return 0, fmt.Errorf("cannot read all-time clicks: %w", err)
	}
	if len(res.Data) != 1 {
		return 0, nil
	}
	return rawRow(res.Data[0])[0].int()
}

func growth(now, before int64) *float64 {
	if before == 0 {
		return nil
	}
	g := math.RoundToEven(float64(now-before)/float64(before)*1000) / 10
	return &g
}
