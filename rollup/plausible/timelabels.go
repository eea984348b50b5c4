package plausible

// maxTimeLabels bounds meta.time_labels (a Waymark limit).
const maxTimeLabels = 1_000_000

// timeLabelCount is len(timeLabels(q)) without building them.
func timeLabelCount(q *Query) int64 {
	first, last := q.From.Unix(), q.Last().Unix()
	switch q.TimeDimension() {
	case "time:hour":
		return (last-first)/3600 + 2
	case "time:day":
		return int64(localDay(q.Timezone, last)-localDay(q.Timezone, first)) + 1
	}
	return 0 // weeks and months: at most a few hundred thousand
}

// timeLabels lists every bucket of the query's time dimension over its
// range (stats/time.ex time_labels).
func timeLabels(q *Query) []string {
	loc := q.Timezone
	first, last := q.From.Unix(), q.Last().Unix()
	firstDay, lastDay := localDay(loc, first), localDay(loc, last)
	var out []string
	switch q.TimeDimension() {
	case "time:day":
		for d := firstDay; d <= lastDay; d++ {
			out = append(out, d.String())
		}
	case "time:week":
		n := int64(lastDay-firstDay.monday()) / 7
		for k := int64(0); k <= n; k++ {
			d := firstDay + day(7*k)
			if m := d.monday(); m >= firstDay && m <= lastDay {
				d = m
			}
			out = append(out, d.String())
		}
	case "time:month":
		fy, fm, _ := firstDay.civil()
		ly, lm, _ := lastDay.civil()
		n := (ly*12 + lm) - (fy*12 + fm)
		start := lastDay.monthStart()
		for k := n; k >= 0; k-- {
			out = append(out, start.addMonths(-k).String())
		}
	case "time:hour":
		off := int64(offsetAt(loc, first))
		local := first + off
		fromLocal := local - floorMod(local, 3600) // minute and second 0, same offset
		n := (last - (fromLocal - off)) / 3600
		for k := int64(0); k <= n; k++ {
			t := fromLocal + 3600*k
			d := day(floorDiv(t, 86400))
			b := d.appendISO(make([]byte, 0, 19))
			b = append(b, ' ')
			b = appendPadded(b, int(floorMod(t, 86400)/3600), 2)
			b = append(b, ":00:00"...)
			out = append(out, string(b))
		}
	}
	return out
}

// TimeLabels lists every bucket of q's time dimension over its range, as
// meta.time_labels gives them.
func (q *Query) TimeLabels() []string { return timeLabels(q) }
