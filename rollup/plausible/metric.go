package plausible

import "math"

// ClickHouse rounds Float64 half to even; round(x, 2) scales, rounds and
// scales back in binary float (stats/sql/expression.ex).
func roundEven(x float64) float64 { return math.RoundToEven(x) }

func round2(x float64) float64 { return math.RoundToEven(x*100) / 100 }

// finite is ifNotFinite(x, 0) with greatest(x, 0).
func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
		return 0
	}
	return x
}

// metric renders metric m of group g of part r (g nil: the group is
// missing from this side of the join, so ClickHouse's default).
func (r *partResult) metric(m string, g *group) Value {
	if g == nil {
		switch m {
		case "views_per_visit", "conversion_rate", "group_conversion_rate":
			return FloatValue(0)
		case "percentage", "time_on_page", "scroll_depth":
			return NullValue()
		}
		return IntValue(0)
	}
	switch m {
	case "visitors":
		return IntValue(g.visitors)
	case "visits":
		return IntValue(g.visits)
	case "pageviews":
		return IntValue(g.pageviews)
	case "events":
		return IntValue(g.events)
	case "bounce_rate":
		return IntValue(int64(finite(roundEven(float64(g.bounces) / float64(g.bounceBase) * 100))))
	case "visit_duration":
		return IntValue(int64(finite(roundEven(float64(g.durSum) / float64(g.sessions)))))
	case "views_per_visit":
		return FloatValue(finite(round2(float64(g.pvSum) / float64(g.sessions))))
	case "time_on_page":
		if g.topVisits == 0 {
			return NullValue()
		}
		return IntValue(int64(roundEven(float64(g.topMs) / 1000 / float64(g.topVisits))))
	case "scroll_depth":
		if g.sdN == 0 {
			return NullValue()
		}
		return IntValue(int64(roundEven(float64(g.sdSum) / float64(g.sdN))))
	case "percentage":
		if r.total <= 0 {
			return NullValue()
		}
		return FloatValue(round2(float64(g.visitors) / float64(r.total) * 100))
	case "conversion_rate":
		if r.crTotal <= 0 {
			return FloatValue(0)
		}
		return FloatValue(round2(float64(g.visitors) / float64(r.crTotal) * 100))
	case "group_conversion_rate":
		c := r.groupTotals.lookup(g.codes)
		if c == nil || c.visitors <= 0 {
			return FloatValue(0)
		}
		return FloatValue(round2(float64(g.visitors) / float64(c.visitors) * 100))
	}
	panic("BUG: unknown metric " + m)
}
