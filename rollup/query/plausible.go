package query

import (
	"time"

	"github.com/waymark/waymark/rollup/plausible"
	"github.com/waymark/waymark/store"
)

// PlausibleSite is rollup/plausible's view of a site: its goals, and
// when its first event held was (start, Backend.SiteStatsStart).
func PlausibleSite(s store.Site, start time.Time) plausible.Site {
	ps := plausible.Site{ID: s.ID, Domain: s.Domain, Timezone: s.Timezone}
	for _, g := range s.Goals {
		ps.Goals = append(ps.Goals, plausible.Goal{ID: g.ID, DisplayName: g.DisplayName, EventName: g.EventName, PagePath: g.PagePath})
	}
	ps.StatsStart = start
	return ps
}
