package plausible

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
