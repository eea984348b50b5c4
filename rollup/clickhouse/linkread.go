package clickhouse

import (
	"context"
	"fmt"
	"strings"

	"github.com/waymark/waymark/rollup/query"
)

// linkHours are a link dimension's rows hour by hour (hours since the
// epoch) over [lo, hi) ms: those of the plan's clean hours from the cache
// or link_rows (then cached), those after the horizon from raw clicks.
func (b *Backend) linkHours(ctx context.Context, p *linkPlan, code, dim, col string, hi int64) (map[int64][]linkRow, error) {
	out := make(map[int64][]linkRow, len(p.versions)+1)
	var miss []int64
	for i, v := range p.versions {
		h := p.start + int64(i)
		if rows, ok := b.links.get(linkRowKey{code, dim, h, v}); ok {
			out[h] = rows
		} else {
			miss = append(miss, h)
		}
	}
	if len(miss) > 0 {
		got, err := b.readLinkRows(ctx, p, code, dim, miss)
		if err != nil {
			return nil, err
		}
		for _, h := range miss {
			b.links.put(linkRowKey{code, dim, h, p.versions[h-p.start]}, got[h])
			out[h] = got[h]
		}
	}
	if p.h < hi {
		v := col
		if dim == "" {
			v = "''"
		}
		body, err := b.c.QueryRowBinary(ctx, "SELECT "+v+" AS v, toUInt32(toStartOfHour(time)) AS hr, countIf("+notBot+"), countIf("+isBot+
			"), groupUniqArrayIf(visitor, "+notBot+") FROM events FINAL WHERE "+linkWhere(code)+" AND "+timeIn(p.h, hi)+" GROUP BY v, hr")
		if err != nil {
			return nil, fmt.Errorf("cannot read the link's open hours: %w", err)
		}
		if err := scanLinkRows(body, false, func(h int64, r linkRow) { out[h] = append(out[h], r) }); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readLinkRows reads the rows of the plan's hours miss (ascending), of
// their versions only.
func (b *Backend) readLinkRows(ctx context.Context, p *linkPlan, code, dim string, miss []int64) (map[int64][]linkRow, error) {
	var vs strings.Builder
	first, last := miss[0], miss[len(miss)-1]
	for h := first; h <= last; h++ {
		if vs.Len() > 0 {
			vs.WriteString(", ")
		}
		vs.WriteString(Uint(p.versions[h-p.start]))
	}
	body, err := b.c.QueryRowBinary(ctx, fmt.Sprintf("SELECT value, toUInt32(hour), clicks, bots, visitor_set FROM link_rows WHERE code = %s AND dim = %s"+
		" AND hour >= toDateTime(%d) AND hour < toDateTime(%d) AND version = arrayElement([%s], intDiv(toUInt32(hour) - %d, 3600) + 1)",
		String(code), String(dim), first*3600, (last+1)*3600, vs.String(), first*3600))
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
// totals from the plan's rows and the raw clicks after its horizon.
func (b *Backend) linkStatsFromRows(ctx context.Context, p *linkPlan, code string, starts []int64, end int64, out *query.LinkStats) error {
	hours, err := b.linkHours(ctx, p, code, "", "", end)
	if err != nil {
		return err
	}
	sets := make([]linkSet, len(starts))
	var total linkSet
	k := 0
	for h := starts[0] / msPerHour; h < end/msPerHour; h++ {
		for k+1 < len(starts) && starts[k+1]/msPerHour <= h {
			k++
		}
		for _, r := range hours[h] {
			out.Series[k].Clicks += r.clicks
			out.Totals.Clicks += r.clicks
			out.Totals.BotClicks += r.bots
			if err := sets[k].add(r.visitors); err != nil {
				return err
			}
		}
	}
	for k := range sets {
		if out.Series[k].Clicks > 0 {
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
// the plan's rows and the raw clicks after its horizon (unsorted).
func (b *Backend) linkBreakdownFromRows(ctx context.Context, p *linkPlan, code, dim, col string, hi int64) ([]query.LinkBreakdownRow, error) {
	hours, err := b.linkHours(ctx, p, code, dim, col, hi)
	if err != nil {
		return nil, err
	}
	type acc struct {
		clicks int64
		set    linkSet
	}
	byValue := map[string]*acc{}
	for _, rows := range hours {
		for _, r := range rows {
			a := byValue[r.value]
			if a == nil {
				a = &acc{}
				byValue[r.value] = a
			}
			a.clicks += r.clicks
			if err := a.set.add(r.visitors); err != nil {
				return nil, err
			}
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
