package plausible

import "time"

// optimize applies QueryOptimizer.optimize's steps that change results or
// the echo.
func optimize(q *Query, in inputRange, orderBy []Order, orderGiven bool) {
	// update_group_by_time: "time" by the length of the (untrimmed) range.
	timeDim := ""
	for i, d := range q.Dimensions {
		if d == "time" {
			q.Dimensions[i] = resolveTimeDimension(q.From, q.Last())
		}
		if timeDim == "" && len(q.Dimensions[i]) >= 4 && q.Dimensions[i][:4] == "time" {
			timeDim = q.Dimensions[i]
		}
	}
	// add_missing_order_by, update_time_in_order_by.
	if !orderGiven {
		if timeDim != "" {
			orderBy = []Order{{Key: timeDim}}
		}
		orderBy = append(orderBy, Order{Key: q.Metrics[0], Desc: true})
	}
	for i := range orderBy {
		if orderBy[i].Key == "time" {
			orderBy[i].Key = timeDim
		}
	}
	q.OrderBy = orderBy
	extendHostnameFilters(q)
	if q.Include.TrimRelativeDateRange {
		trimRelativeDateRange(q, in)
	}
	// The goals the event:goal dimension considers
	// (Goals.goals_matching_toplevel_filters).
	q.goalDims = q.goalDims[:0]
	for i := range q.goals {
		q.goalDims = append(q.goalDims, i)
	}
	for i := range q.Filters {
		f := &q.Filters[i]
		if !f.IsLeaf() || f.Dimension != "event:goal" {
			continue
		}
		kept := q.goalDims[:0]
		for _, gi := range q.goalDims {
			for _, c := range f.Values {
				if goalNameMatches(q.goals[gi].name, f, c) {
					kept = append(kept, gi)
					break
				}
			}
		}
		q.goalDims = kept
	}
}

func resolveTimeDimension(first, last time.Time) string {
	secs := int64(last.Sub(first) / time.Second)
	switch {
	case secs/3600 <= 48:
		return "time:hour"
	case secs/86400 <= 40:
		return "time:day"
	case secs/(7*86400) <= 52:
		return "time:week"
	}
	return "time:month"
}

var dimensionsHostnameMap = map[string]string{
	"visit:source":       "visit:entry_page_hostname",
	"visit:entry_page":   "visit:entry_page_hostname",
	"visit:utm_medium":   "visit:entry_page_hostname",
	"visit:utm_source":   "visit:entry_page_hostname",
	"visit:utm_campaign": "visit:entry_page_hostname",
	"visit:utm_content":  "visit:entry_page_hostname",
	"visit:utm_term":     "visit:entry_page_hostname",
	"visit:referrer":     "visit:entry_page_hostname",
	"visit:exit_page":    "visit:exit_page_hostname",
}

// extendHostnameFilters copies each top-level event:hostname filter onto
// the entry (or exit) page hostname for source-like dimensions, so a
// breakdown does not mix referrers across hostnames
// (extend_hostname_filters_to_visit).
func extendHostnameFilters(q *Query) {
	var hostFilters []Filter
	for _, f := range q.Filters {
		if f.IsLeaf() && f.Dimension == "event:hostname" {
			hostFilters = append(hostFilters, f)
		}
	}
	if len(hostFilters) == 0 {
		return
	}
	for _, d := range q.Dimensions {
		target, ok := dimensionsHostnameMap[d]
		if !ok {
			continue
		}
		for _, f := range hostFilters {
			f.Dimension = target
			q.Filters = append(q.Filters, f)
		}
	}
}

// trimRelativeDateRange cuts day, month and year ranges at now
// (trim_relative_date_range): day to the current hour's end, month and year
// to today's end.
func trimRelativeDateRange(q *Query, in inputRange) {
	loc := q.Timezone
	now := q.Now.Unix()
	today := localDay(loc, now)
	switch in.kind {
	case rangeDay:
		off := int64(offsetAt(loc, now))
		local := now + off
		hourEnd := local - floorMod(local, 3600) + 3599 - off // same offset, :59:59
		first := q.From
		last := time.Unix(hourEnd, 0).UTC()
		q.From, last = orderedRange(first, last)
		q.To = last.Add(time.Second)
	case rangeMonth, rangeYear:
		first := localDay(loc, q.From.Unix())
		lastDay := localDay(loc, q.Last().Unix())
		if today < lastDay {
			lastDay = today
		}
		f, l := orderedRange(dayBounds(first, lastDay, loc))
		q.From, q.To = f, l.Add(time.Second)
	}
}
