package rollup

import (
	"github.com/waymark/waymark/rollup/query"
)

var weekdayNames = [7]string{"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}

// SiteHeatmap adds a site's hour rows over r up by weekday and hour of
// the day in r's zone. Hours are UTC hours: in a zone whose offset is not
// a whole number of hours, an hour counts for the local hour it starts in.
func (a *Aggregator) SiteHeatmap(site string, r query.Range) (*query.Heatmap, error) {
	if err := query.CheckRange(r); err != nil {
		return nil, err
	}
	if err := a.enter(); err != nil {
		return nil, err
	}
	defer a.leave()
	loc := r.Location()
	now := a.cfg.Now()
	h0, h1 := hoursOf(r)
	h1 = min(h1, hourOf(now.UnixMilli())+1)
	hcut, _ := a.tierCutoffs(now)
	out := &query.Heatmap{From: r.From, To: r.To, Timezone: loc.String(), Weekdays: weekdayNames}
	if h0 < hcut {
		out.Clipped = true
		h0 = hcut
	}
	out.HoursFrom = hourStart(h0).In(loc)
	if h1 <= h0 {
		return out, nil
	}
	// The cell of each UTC hour, computed once per hour.
	cell := func(h uint32) (int, int) {
		t := hourStart(h).In(loc)
		return (int(t.Weekday()) + 6) % 7, t.Hour()
	}
	err := a.hourTotals(kindSite, site, granHour, h0, h1, func(h uint32, c *counters) {
		wd, hr := cell(h)
		out.Pageviews[wd][hr] += c[fCount]
		out.Visits[wd][hr] += c[fVisits] // the visits whose last event is in h
	})
	if err != nil {
		return nil, err
	}
	// The crossing row at boundary h+1 holds the visits that started by
	// h and went on past it: active in h too.
	err = a.hourTotals(kindSite, site, granCross, h0+1, h1+1, func(b uint32, c *counters) {
		wd, hr := cell(b - 1)
		out.Visits[wd][hr] += c[fVisits]
	})
	if err != nil {
		return nil, err
	}
	for wd := range out.Pageviews {
		for hr := range out.Pageviews[wd] {
			pv, v := out.Pageviews[wd][hr], out.Visits[wd][hr]
			out.Total.Pageviews += pv
			out.Total.Visits += v
			out.Max.Pageviews = max(out.Max.Pageviews, pv)
			out.Max.Visits = max(out.Max.Visits, v)
		}
	}
	return out, nil
}
