package query

import (
	"testing"
	"time"
)

// TestPeriodRange: Plausible's relative ranges (stats/query_builder.ex).
func TestPeriodRange(t *testing.T) {
	ny := mustLoc(t, "America/New_York")
	now := time.Date(2026, 3, 10, 3, 0, 0, 0, time.UTC) // Mar 9 23:00 EDT (DST began Mar 8)
	d := func(m time.Month, day int) time.Time { return time.Date(2026, m, day, 0, 0, 0, 0, ny) }
	for _, c := range []struct {
		period   string
		from, to time.Time
	}{
		{"day", d(3, 9), d(3, 10)},
		{"7d", d(3, 2), d(3, 9)}, // ends yesterday; a 167-hour week across the DST change
		{"30d", d(2, 7), d(3, 9)},
		{"1d", d(3, 8), d(3, 9)},
		{"month", d(3, 1), d(4, 1)},
		{"year", d(1, 1), time.Date(2027, 1, 1, 0, 0, 0, 0, ny)},
	} {
		r, err := PeriodRange(c.period, now, ny)
		if err != nil {
			t.Errorf("%s: %v", c.period, err)
			continue
		}
		if !r.From.Equal(c.from) || !r.To.Equal(c.to) {
			t.Errorf("%s: %v..%v; want %v..%v", c.period, r.From, r.To, c.from, c.to)
		}
	}
	for _, bad := range []string{"0d", "7", "d", "-3d", "5001d", "12mo", "7D", "07d"} {
		if _, err := PeriodRange(bad, now, ny); err == nil {
			t.Errorf("period %q: no error", bad)
		}
	}
}

func mustLoc(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("LoadLocation(%q): %v", name, err)
	}
	return loc
}
