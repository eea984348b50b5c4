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
// midnight after t, and the bots of its hour: every unit from t's hour
// on. So each site is one site_dirty row (migration 8): dirty from its
// oldest late event's hour, under the batch's version; a site none of
// whose units from there is ready yet gets none (they cannot be clean).
// All sites' marks go in one INSERT and the clicks' hours in one of
// link_units: an INSERT per site was 20 of the 23 requests of each
// shipped batch in bench/README's issue 14 run (30 days of events, every
// one late), and a site_units row per unit up to 720 rows a site in
// every batch. It runs after the events and before the identities, so a
// crash between leaves the retry to mark again.
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
	for site, s := range spans {
		if hourOf(s.first) < limit {
			sites = append(sites, site)
		}
	}
	if len(sites) == 0 {
		return nil
	}
	slices.Sort(sites) // the block arrives in the table's order
	var sb strings.Builder
	sb.WriteString("INSERT INTO site_dirty (site, from_unit, version) VALUES ")
	units := 0
	for i, site := range sites {
		if i > 0 {
			sb.WriteString(", ")
		}
		from := hourOf(spans[site].first)
		fmt.Fprintf(&sb, "(%s, toDateTime(%d), %d)", String(site), from*3600, version)
		units += int(limit - from)
	}
	if err := b.c.Exec(ctx, sb.String()); err != nil {
		return fmt.Errorf("cannot mark %d sites dirty: %w", len(sites), err)
	}
	b.c.m.dirtyMarks.Add(len(sites))
	b.c.m.unitsDirtied.Add(units)
	return nil
}
