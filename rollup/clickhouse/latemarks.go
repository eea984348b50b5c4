package clickhouse

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// markLateAtOnce marks dirty the units markLate marks (materialize.go
// says which and why), all sites' in one INSERT of site_units and the
// clicks' hours in one of link_units, under one version. markLate spends
// an INSERT on each site: in bench/README's issue 14 run (30 days of
// events, every one late) that was 20 of the 23 requests of each shipped
// batch and more than half of ClickHouse's CPU. The rows, the version
// rule and the moment (after the events, before the identities) are
// markLate's, so a crash before the identities still leaves the retry to
// mark again (TestLateMarksOfABatchInOneInsert checks both mark the same
// units).
func (b *Backend) markLateAtOnce(ctx context.Context, spans map[string]lateSpan, clicks *lateSpan) error {
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
		h0, h1 := hourOf(s.first)-24, min(floorDiv(s.last, 24*msPerHour)*24+25, limit)
		for h := h0; h < h1; h++ {
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
