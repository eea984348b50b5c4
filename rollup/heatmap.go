package rollup

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/rollup/query"
	"github.com/waymark/waymark/store"
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

// serveSiteHeatmap answers GET /v1/sites/{id}/stats/heatmap with period=
// or from/to/tz.
func (a *Aggregator) serveSiteHeatmap(ctx *fasthttp.RequestCtx, s store.Site) {
	r, err := a.siteRangeArg(ctx.QueryArgs(), s.Timezone)
	if err != nil {
		writeProblem(ctx, "invalid-request", err.Error())
		return
	}
	out, err := a.SiteHeatmap(s.ID, r)
	if err != nil {
		a.queryError(ctx, err)
		return
	}
	writeJSON(ctx, out)
}

// siteRangeArg reads period= (Plausible's relative ranges) or, without it,
// from/to as the other site stats do; tz defaults to the site's zone.
func (a *Aggregator) siteRangeArg(args *fasthttp.Args, siteTZ string) (query.Range, error) {
	p := string(args.Peek("period"))
	if p == "" {
		return a.parseRange(args, siteTZ)
	}
	if len(args.Peek("from")) > 0 || len(args.Peek("to")) > 0 {
		return query.Range{}, errors.New("give period or from/to, not both")
	}
	loc, err := tzArg(args, siteTZ)
	if err != nil {
		return query.Range{}, err
	}
	return periodRange(p, a.cfg.Now(), loc)
}

var daysPeriod = regexp.MustCompile(`^([1-9][0-9]{0,3})d$`)

// periodRange is a relative range as Plausible's Stats API v2 date_range
// defines it (stats/query_builder.ex): "day" is today; "Nd" the N days
// before today (7d and 30d end yesterday); "month" and "year" the current
// ones, whole.
func periodRange(p string, now time.Time, loc *time.Location) (query.Range, error) {
	t := now.In(loc)
	midnight := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
	r := query.Range{Loc: loc}
	switch p {
	case "day", "today":
		r.From, r.To = midnight, midnight.AddDate(0, 0, 1)
	case "month":
		r.From = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, loc)
		r.To = r.From.AddDate(0, 1, 0)
	case "year":
		r.From = time.Date(t.Year(), 1, 1, 0, 0, 0, 0, loc)
		r.To = r.From.AddDate(1, 0, 0)
	default:
		m := daysPeriod.FindStringSubmatch(p)
		if m == nil {
			return r, fmt.Errorf("period %q: want day, month, year or Nd (1 to 5000 days)", p)
		}
		n, _ := strconv.Atoi(m[1]) // the pattern allows digits only
		if n > 5000 {
			return r, fmt.Errorf("period %q: at most 5000 days", p)
		}
		r.From, r.To = midnight.AddDate(0, 0, -n), midnight
	}
	return r, nil
}
