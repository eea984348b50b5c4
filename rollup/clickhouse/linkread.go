package clickhouse

import (
	"context"
	"fmt"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/waymark/waymark/rollup/query"
)

// linkParts are a link dimension's rows over [the plan's start, hi):
// the days asked (each in the plan's days) from day rows, every other
// hour from hour rows, both from the cache or ClickHouse (then cached),
// and the hours after the horizon from raw clicks. The three reads run
// at once.
type linkParts struct {
	hours map[int64][]linkRow // by hour since the epoch
	days  map[int64][]linkRow // by day since the epoch
}

func (b *Backend) linkParts(ctx context.Context, p *linkPlan, code, dim, col string, hi int64, days []int64) (*linkParts, error) {
	out := &linkParts{hours: make(map[int64][]linkRow, len(p.versions)+1), days: make(map[int64][]linkRow, len(days))}
	byDay := make(map[int64]bool, len(days))
	var missDays []int64
	for _, d := range days {
		byDay[d] = true
		if rows, ok := b.links.get(linkRowKey{code, dim, d * hoursPerDay, p.days[d], true}); ok {
			out.days[d] = rows
		} else {
			missDays = append(missDays, d)
		}
	}
	var miss []int64
	for i, v := range p.versions {
		h := p.start + int64(i)
		if byDay[floorDiv(h, hoursPerDay)] {
			continue
		}
		if rows, ok := b.links.get(linkRowKey{code, dim, h, v, false}); ok {
			out.hours[h] = rows
		} else {
			miss = append(miss, h)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	var gotDays, gotHours map[int64][]linkRow
	var open []linkHourRow
	if len(missDays) > 0 {
		g.Go(func() (err error) {
			gotDays, err = b.readLinkDayRows(gctx, code, dim, missDays, p.days)
			return err
		})
	}
	if len(miss) > 0 {
		g.Go(func() (err error) {
			gotHours, err = b.readLinkRows(gctx, p, code, dim, miss)
			return err
		})
	}
	if p.h < hi {
		g.Go(func() (err error) {
			open, err = b.readOpenLinkHours(gctx, p, code, dim, col, hi)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for _, d := range missDays {
		b.links.put(linkRowKey{code, dim, d * hoursPerDay, p.days[d], true}, gotDays[d])
		out.days[d] = gotDays[d]
	}
	b.c.m.linkDaysRead.Add(len(days))
	for _, h := range miss {
		b.links.put(linkRowKey{code, dim, h, p.versions[h-p.start], false}, gotHours[h])
		out.hours[h] = gotHours[h]
	}
	for _, r := range open {
		out.hours[r.hour] = append(out.hours[r.hour], r.row)
	}
	return out, nil
}

type linkHourRow struct {
	hour int64
	row  linkRow
}

// readOpenLinkHours groups the raw clicks from the plan's horizon to hi
// by value and hour.
func (b *Backend) readOpenLinkHours(ctx context.Context, p *linkPlan, code, dim, col string, hi int64) ([]linkHourRow, error) {
	v := col
	if dim == "" {
		v = "''"
	}
	body, err := b.c.QueryRowBinary(ctx, "SELECT "+v+" AS v, toUInt32(toStartOfHour(time)) AS hr, countIf("+notBot+"), countIf("+isBot+
		"), groupUniqArrayIf(visitor, "+notBot+") FROM events FINAL WHERE "+linkWhere(code)+" AND "+timeIn(p.h, hi)+" GROUP BY v, hr")
	if err != nil {
		return nil, fmt.Errorf("cannot read the link's open hours: %w", err)
	}
	var out []linkHourRow
	err = scanLinkRows(body, false, func(h int64, r linkRow) { out = append(out, linkHourRow{h, r}) })
	return out, err
}

// readLinkRows reads the rows of the plan's hours miss (ascending), of
// their versions only.
func (b *Backend) readLinkRows(ctx context.Context, p *linkPlan, code, dim string, miss []int64) (map[int64][]linkRow, error) {
	first, last := miss[0], miss[len(miss)-1]
	vs := make([]uint64, last-first+1) // 0 for an hour not asked: no row has it
	for _, h := range miss {
		vs[h-first] = p.versions[h-p.start]
	}
	body, err := b.c.QueryRowBinary(ctx, fmt.Sprintf("SELECT value, toUInt32(hour), clicks, bots, visitor_set FROM link_rows WHERE code = %s AND dim = %s"+
		" AND hour >= toDateTime(%d) AND hour < toDateTime(%d) AND version = arrayElement(%s, intDiv(toUInt32(hour) - %d, 3600) + 1)",
		String(code), String(dim), first*3600, (last+1)*3600, hourVersionsArray(vs), first*3600))
	if err != nil {
		return nil, fmt.Errorf("cannot read the link rows: %w", err)
	}
	got := map[int64][]linkRow{}
	err = scanLinkRows(body, true, func(h int64, r linkRow) { got[h] = append(got[h], r) })
	return got, err
}

// scanLinkRows reads RowBinary rows of value String, hour UInt32, clicks
// and bots UInt64 and the visitors: an encoded set, or an id array.
func scanLinkRows(body []byte, encoded bool, fn func(h int64, r linkRow)) error {
	r := &rbReader{b: body}
	for len(r.b) > 0 && r.err == nil {
		n := r.uvarint()
		value := string(r.need(int(min(n, uint64(len(r.b))))))
		h := int64(r.u32()) / 3600
		row := linkRow{value: value, clicks: int64(r.u64()), bots: int64(r.u64())}
		if encoded {
			n := r.uvarint()
			raw := r.need(int(min(n, uint64(len(r.b)))))
			if r.err != nil {
				break
			}
			set, err := decodeLinkSet(raw)
			if err != nil {
				return err
			}
			row.visitors = set
		} else {
			ids := make([]uint64, min(r.uvarint(), uint64(len(r.b)/8)))
			for i := range ids {
				ids[i] = r.u64()
			}
			row.visitors = linkSetOf(ids)
		}
		if r.err == nil {
			fn(h, row)
		}
	}
	if r.err != nil {
		return fmt.Errorf("cannot read link rows: %w", r.err)
	}
	return nil
}

// linkStatsFromRows fills out's series (buckets from starts, ms) and
// totals from the plan's rows and the raw clicks after its horizon. A
// day of day rows stands for its 24 hours when one bucket holds all of
// them; a bucket that is exactly one day takes the day row's estimate.
func (b *Backend) linkStatsFromRows(ctx context.Context, p *linkPlan, code string, starts []int64, end int64, out *query.LinkStats) error {
	h0, h1 := starts[0]/msPerHour, end/msPerHour
	bucket := func(h int64) int {
		k, _ := slices.BinarySearch(starts, h*msPerHour+1)
		return k - 1
	}
	var days []int64
	for d := floorDiv(h0+hoursPerDay-1, hoursPerDay); (d+1)*hoursPerDay <= h1; d++ {
		if _, ok := p.days[d]; ok && bucket(d*hoursPerDay) == bucket((d+1)*hoursPerDay-1) {
			days = append(days, d)
		}
	}
	parts, err := b.linkParts(ctx, p, code, "", "", end, days)
	if err != nil {
		return err
	}
	sets := make([]linkSet, len(starts))
	type from struct {
		parts    int    // day rows and hours with rows added to the bucket
		estimate uint64 // of its one day row, when that is all it holds
		day      bool
	}
	fr := make([]from, len(starts))
	addRows := func(k int, rows []linkRow, day bool) error {
		for _, r := range rows {
			out.Series[k].Clicks += r.clicks
			out.Totals.Clicks += r.clicks
			out.Totals.BotClicks += r.bots
			if err := sets[k].add(r.visitors); err != nil {
				return err
			}
			fr[k].parts++
			fr[k].day, fr[k].estimate = day, r.estimate
		}
		return nil
	}
	for h := h0; h < h1; h++ {
		k := bucket(h)
		if rows, ok := parts.days[floorDiv(h, hoursPerDay)]; ok {
			if h%hoursPerDay == 0 {
				if err := addRows(k, rows, true); err != nil {
					return err
				}
			}
			continue
		}
		if err := addRows(k, parts.hours[h], false); err != nil {
			return err
		}
	}
	var total linkSet
	for k := range sets {
		switch {
		case out.Series[k].Clicks == 0:
		case fr[k].parts == 1 && fr[k].day:
			out.Series[k].UniqueVisitors = fr[k].estimate
		default:
			out.Series[k].UniqueVisitors = sets[k].estimate()
		}
		if err := total.add(&sets[k]); err != nil {
			return err
		}
	}
	out.Totals.UniqueVisitors = total.estimate()
	return nil
}

// linkBreakdownFromRows is a dimension's values with non-bot clicks, from
// the plan's rows (its whole days from day rows) and the raw clicks after
// its horizon (unsorted).
func (b *Backend) linkBreakdownFromRows(ctx context.Context, p *linkPlan, code, dim, col string, lo, hi int64) ([]query.LinkBreakdownRow, error) {
	var days []int64
	for d := floorDiv(hourOf(lo)+hoursPerDay-1, hoursPerDay); (d+1)*hoursPerDay <= hourOf(hi); d++ {
		if _, ok := p.days[d]; ok {
			days = append(days, d)
		}
	}
	parts, err := b.linkParts(ctx, p, code, dim, col, hi, days)
	if err != nil {
		return nil, err
	}
	type acc struct {
		clicks int64
		set    linkSet
	}
	byValue := map[string]*acc{}
	add := func(rows []linkRow) error {
		for _, r := range rows {
			a := byValue[r.value]
			if a == nil {
				a = &acc{}
				byValue[r.value] = a
			}
			a.clicks += r.clicks
			if err := a.set.add(r.visitors); err != nil {
				return err
			}
		}
		return nil
	}
	for _, rows := range parts.days {
		if err := add(rows); err != nil {
			return nil, err
		}
	}
	for _, rows := range parts.hours {
		if err := add(rows); err != nil {
			return nil, err
		}
	}
	out := []query.LinkBreakdownRow{}
	for v, a := range byValue {
		if a.clicks > 0 {
			out = append(out, query.LinkBreakdownRow{Value: v, Clicks: a.clicks, UniqueVisitors: a.set.estimate()})
		}
	}
	return out, nil
}
