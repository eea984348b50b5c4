package clickhouse

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// markLate marks dirty every unit a segment's late events may change: a
// late event at t changes only visits an event at t could join or start,
// all closing at t or later (however long ago they began), the later
// visits of its visitor (returning, merged), the visits carried past each
// midnight after t, and the bots of its hour: every ready unit from t's
// hour on. A click counts in its own hour only. Only hours that can be
// clean are marked. All sites' units go in one INSERT of site_units and
// the clicks' hours in one of link_units, under one version: an INSERT
// per site was 20 of the 23 requests of each shipped batch in
// bench/README's issue 14 run (30 days of events, every one late) and
// more than half of ClickHouse's CPU. It runs after the events and
// before the identities, so a crash between leaves the retry to mark
// again.
func (b *Backend) markLate(ctx context.Context, spans map[string]lateSpan, clicks *lateSpan) error {
	version := uint64(time.Now().UnixNano())
	if clicks != nil {
		h1 := min(hourOf(clicks.last)+1, hourOf(b.cfg.Now().Add(-b.cfg.Lateness).UnixMilli())+1)
		if err := b.c.insertLinkUnits(ctx, hourOf(clicks.first), h1, version, 0); err != nil {
			return err
		}
	}
	limit := b.readyBefore() + 1
	sites := make([]string, 0, len(spans))
	for site := range spans {
		sites = append(sites, site)
	}
	slices.Sort(sites) // the block arrives in the table's order
	var sb strings.Builder
	units := 0
	for _, site := range sites {
		s := spans[site]
		for h := hourOf(s.first); h < limit; h++ {
			if units == 0 {
				sb.WriteString("INSERT INTO site_units (site, unit, version, state) VALUES ")
			} else {
				sb.WriteString(", ")
			}
			fmt.Fprintf(&sb, "(%s, toDateTime(%d), %d, 0)", String(site), h*3600, version)
			units++
		}
	}
	if units == 0 {
		return nil
	}
	if err := b.c.Exec(ctx, sb.String()); err != nil {
		return fmt.Errorf("cannot mark the units of %d sites: %w", len(sites), err)
	}
	b.c.m.unitsDirtied.Add(units)
	return nil
}
