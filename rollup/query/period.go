package query

import (
	"fmt"
	"regexp"
	"strconv"
	"time"
)

var daysPeriod = regexp.MustCompile(`^([1-9][0-9]{0,3})d$`)

// PeriodRange is a relative range as Plausible's Stats API v2 date_range
// defines it (stats/query_builder.ex): "day" is today; "Nd" the N days
// before today (7d and 30d end yesterday); "month" and "year" the current
// ones, whole.
func PeriodRange(p string, now time.Time, loc *time.Location) (Range, error) {
	t := now.In(loc)
	midnight := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
	r := Range{Loc: loc}
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
