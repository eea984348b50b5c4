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
// A click counts in its own hour only: the late clicks are one row of
// the links' key over the ready hours from the oldest's to the newest's.
// All go in one INSERT: an INSERT per site was 20 of the 23 requests of
// each shipped batch in bench/README's issue 14 run (30 days of events,
// every one late), a site_units row per unit up to 720 rows a site in
// every batch, and the link hours' own INSERT was then most of what the
// marks still cost ClickHouse (DESIGN.md, "Dirty from a unit on"). It
// runs after the events and before the identities, so a crash between
// leaves the retry to mark again.
func (b *Backend) markLate(ctx context.Context, spans map[string]lateSpan, clicks *lateSpan) error {
	version := uint64(time.Now().UnixNano())
	var sb strings.Builder
	rows := 0
	row := func(key string, from, until int64) {
		if rows == 0 {
			sb.WriteString("INSERT INTO site_dirty (site, from_unit, until_unit, version) VALUES ")
		} else {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "(%s, toDateTime(%d), toDateTime(%d), %d)", String(key), from*3600, until*3600, version)
		rows++
	}
	if clicks != nil {
		h0 := hourOf(clicks.first)
		h1 := min(hourOf(clicks.last)+1, hourOf(b.cfg.Now().Add(-b.cfg.Lateness).UnixMilli())+1)
		if h0 < h1 {
			row(linksKey, h0, h1)
		}
	}
	limit := b.readyBefore() + 1
	sites := make([]string, 0, len(spans))
	for site, s := range spans {
		if hourOf(s.first) < limit {
			sites = append(sites, site)
		}
	}
	slices.Sort(sites) // the block arrives in the table's order
	units := 0
	for _, site := range sites {
		from := hourOf(spans[site].first)
		row(site, from, 0)
		units += int(limit - from)
	}
	if rows == 0 {
		return nil
	}
	if err := b.c.Exec(ctx, sb.String()); err != nil {
		return fmt.Errorf("cannot mark the late hours of %d sites and the links: %w", len(sites), err)
	}
	b.c.m.dirtyMarks.Add(rows)
	b.c.m.unitsDirtied.Add(units)
	return nil
}
