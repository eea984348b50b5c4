package plausible

import "time"

// ISO 8601 parsing as Elixir's Calendar.ISO does it (Date.from_iso8601,
// NaiveDateTime.from_iso8601, DateTime.from_iso8601), which decides what
// Plausible accepts in date_range.

type isoDateTime struct {
	year, month, day     int
	hour, minute, second int
	nanos                int
	hasOffset            bool
	offset               int // seconds east of UTC
}

func digits(s string, n int) (int, bool) {
	if len(s) < n {
		return 0, false
	}
	v := 0
	for i := 0; i < n; i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}

// parseISODate parses "YYYY-MM-DD" (a leading "-" for negative years) and
// returns the rest of s.
func parseISODatePrefix(s string) (y, m, d int, rest string, ok bool) {
	neg := false
	if len(s) > 0 && s[0] == '-' {
		neg, s = true, s[1:]
	}
	if len(s) < 10 || s[4] != '-' || s[7] != '-' {
		return 0, 0, 0, "", false
	}
	y, ok1 := digits(s, 4)
	m, ok2 := digits(s[5:], 2)
	d, ok3 := digits(s[8:], 2)
	if !ok1 || !ok2 || !ok3 || m < 1 || m > 12 || d < 1 || d > daysIn(y, m) {
		return 0, 0, 0, "", false
	}
	if neg {
		y = -y
	}
	return y, m, d, s[10:], true
}

func parseISODate(s string) (y, m, d int, ok bool) {
	y, m, d, rest, ok := parseISODatePrefix(s)
	return y, m, d, ok && rest == ""
}

// parseISODateTime parses date, "T" or " ", "HH:MM:SS", an optional
// fraction and an optional offset (Z, ±HH:MM, ±HHMM, ±HH).
func parseISODateTime(s string) (isoDateTime, bool) {
	var t isoDateTime
	var rest string
	var ok bool
	t.year, t.month, t.day, rest, ok = parseISODatePrefix(s)
	if !ok || len(rest) < 9 || (rest[0] != 'T' && rest[0] != ' ') || rest[3] != ':' || rest[6] != ':' {
		return t, false
	}
	h, ok1 := digits(rest[1:], 2)
	mi, ok2 := digits(rest[4:], 2)
	sec, ok3 := digits(rest[7:], 2)
	if !ok1 || !ok2 || !ok3 || h > 23 || mi > 59 || sec > 59 {
		return t, false
	}
	t.hour, t.minute, t.second = h, mi, sec
	rest = rest[9:]
	if len(rest) > 0 && (rest[0] == '.' || rest[0] == ',') {
		i := 1
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			if i <= 9 {
				t.nanos = t.nanos*10 + int(rest[i]-'0')
			}
			i++
		}
		if i == 1 {
			return t, false
		}
		for n := i - 1; n < 9; n++ {
			t.nanos *= 10
		}
		rest = rest[i:]
	}
	switch {
	case rest == "":
		return t, true
	case rest == "Z":
		t.hasOffset = true
		return t, true
	case rest == "-00:00":
		return t, false
	case rest[0] != '+' && rest[0] != '-':
		return t, false
	}
	sign := 1
	if rest[0] == '-' {
		sign = -1
	}
	rest = rest[1:]
	oh, ok := digits(rest, 2)
	if !ok {
		return t, false
	}
	om := 0
	switch {
	case len(rest) == 2:
	case len(rest) == 5 && rest[2] == ':':
		om, ok = digits(rest[3:], 2)
	case len(rest) == 4:
		om, ok = digits(rest[2:], 2)
	default:
		return t, false
	}
	if !ok || oh > 23 || om > 59 {
		return t, false
	}
	t.hasOffset = true
	t.offset = sign * (oh*3600 + om*60)
	return t, true
}

// instant is the UTC time of a parsed datetime with an offset.
func (t isoDateTime) instant() time.Time {
	return time.Date(t.year, time.Month(t.month), t.day, t.hour, t.minute, t.second, t.nanos, time.UTC).
		Add(-time.Duration(t.offset) * time.Second)
}

func isLeap(y int) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

func daysIn(y, m int) int {
	switch m {
	case 2:
		if isLeap(y) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
