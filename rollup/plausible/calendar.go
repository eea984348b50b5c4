package plausible

import (
	"strconv"
	"time"
)

// day is a calendar date as days since 1970-01-01 (proleptic Gregorian).
type day int64

func dayOf(y, m, d int) day {
	// Howard Hinnant's days_from_civil.
	if m <= 2 {
		y--
	}
	era := floorDiv(int64(y), 400)
	yoe := int64(y) - era*400
	mp := int64(m+9) % 12
	doy := (153*mp+2)/5 + int64(d) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return day(era*146097 + doe - 719468)
}

func (d day) civil() (y, m, dd int) {
	z := int64(d) + 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	dd = int(doy - (153*mp+2)/5 + 1)
	m = int(mp + 3)
	if m > 12 {
		m -= 12
	}
	y = int(yoe + era*400)
	if m <= 2 {
		y++
	}
	return y, m, dd
}

// monday is the Monday of d's ISO week (1970-01-01 was a Thursday).
func (d day) monday() day { return d - day(floorMod(int64(d)+3, 7)) }

func (d day) monthStart() day {
	y, m, _ := d.civil()
	return dayOf(y, m, 1)
}

func (d day) monthEnd() day {
	y, m, _ := d.civil()
	return dayOf(y, m, daysIn(y, m))
}

// addMonths shifts by n calendar months, clamping the day of month (Elixir
// Date.shift).
func (d day) addMonths(n int) day {
	y, m, dd := d.civil()
	t := y*12 + (m - 1) + n
	y, m = int(floorDiv(int64(t), 12)), int(floorMod(int64(t), 12))+1
	if last := daysIn(y, m); dd > last {
		dd = last
	}
	return dayOf(y, m, dd)
}

func (d day) appendISO(dst []byte) []byte {
	y, m, dd := d.civil()
	if y < 0 {
		dst = append(dst, '-')
		y = -y
	}
	dst = appendPadded(dst, y, 4)
	dst = append(dst, '-')
	dst = appendPadded(dst, m, 2)
	dst = append(dst, '-')
	return appendPadded(dst, dd, 2)
}

func (d day) String() string { return string(d.appendISO(nil)) }

func appendPadded(dst []byte, v, width int) []byte {
	s := strconv.Itoa(v)
	for i := len(s); i < width; i++ {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }

// offsetAt is loc's UTC offset in seconds at Unix second t.
func offsetAt(loc *time.Location, t int64) int {
	_, off := time.Unix(t, 0).In(loc).Zone()
	return off
}

// wallToUnix converts a wall-clock time in loc to a Unix second the way
// Elixir's DateTime.new resolves it: in a gap, later picks the first
// instant after it and !later the last one before; when ambiguous, later
// picks the second instant.
func wallToUnix(d day, secOfDay int64, loc *time.Location, later bool) int64 {
	naive := int64(d)*86400 + secOfDay
	var cands []int64
	seen := map[int]bool{}
	for _, probe := range []int64{naive - 2*86400, naive - 86400, naive, naive + 86400, naive + 2*86400} {
		o := offsetAt(loc, probe)
		if seen[o] {
			continue
		}
		seen[o] = true
		if t := naive - int64(o); offsetAt(loc, t) == o {
			cands = append(cands, t)
		}
	}
	if len(cands) > 0 {
		best := cands[0]
		for _, c := range cands[1:] {
			if (later && c > best) || (!later && c < best) {
				best = c
			}
		}
		return best
	}
	// A gap: the transition is the start of the zone period that holds
	// naive read with the offset before it.
	before := offsetAt(loc, naive-86400)
	start, _ := time.Unix(naive-int64(before), 0).In(loc).ZoneBounds()
	if later {
		return start.Unix()
	}
	return start.Unix() - 1
}

// localDay is the date in loc of Unix second t.
func localDay(loc *time.Location, t int64) day {
	return day(floorDiv(t+int64(offsetAt(loc, t)), 86400))
}

// tzCache answers UTC offsets for increasing or clustered times without a
// zone lookup per call.
type tzCache struct {
	loc        *time.Location
	start, end int64 // the cached zone period [start, end)
	off        int64
}

func newTZCache(loc *time.Location) *tzCache { return &tzCache{loc: loc, start: 1, end: 0} }

func (c *tzCache) offset(t int64) int64 {
	if t >= c.start && t < c.end {
		return c.off
	}
	tt := time.Unix(t, 0).In(c.loc)
	_, off := tt.Zone()
	s, e := tt.ZoneBounds()
	c.off = int64(off)
	c.start, c.end = -1<<62, 1<<62
	if !s.IsZero() {
		c.start = s.Unix()
	}
	if !e.IsZero() {
		c.end = e.Unix()
	}
	return c.off
}
