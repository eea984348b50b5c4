package plausible

import (
	"testing"
)

// Ranges on now = 2024-07-10 15:00 in Tallinn (EEST, +03:00; EET +02:00 in
// winter), worked out from QueryBuilder.build_datetime_range: Nd ends
// yesterday, Nmo ends with last month, month/year include future days.
func TestDateRanges(t *testing.T) {
	site := testSite() // stats start 2024-01-15 10:00 UTC = 12:00 in Tallinn
	cases := []struct {
		dateRange, include  string
		wantFirst, wantLast string
		wantTime            string // what "time" resolves to
	}{
		{`"day"`, ``, "2024-07-10T00:00:00+03:00", "2024-07-10T23:59:59+03:00", "time:hour"},
		{`"7d"`, ``, "2024-07-03T00:00:00+03:00", "2024-07-09T23:59:59+03:00", "time:day"},
		{`"28d"`, ``, "2024-06-12T00:00:00+03:00", "2024-07-09T23:59:59+03:00", "time:day"},
		{`"30d"`, ``, "2024-06-10T00:00:00+03:00", "2024-07-09T23:59:59+03:00", "time:day"},
		// 91 days back: 30 to June 10, 31 more to May 10, 30 more to April 10.
		{`"91d"`, ``, "2024-04-10T00:00:00+03:00", "2024-07-09T23:59:59+03:00", "time:week"},
		{`"3d"`, ``, "2024-07-07T00:00:00+03:00", "2024-07-09T23:59:59+03:00", "time:day"},
		{`"month"`, ``, "2024-07-01T00:00:00+03:00", "2024-07-31T23:59:59+03:00", "time:day"},
		// January is in winter time.
		{`"6mo"`, ``, "2024-01-01T00:00:00+02:00", "2024-06-30T23:59:59+03:00", "time:week"},
		// 61 days is more than 40.
		{`"2mo"`, ``, "2024-05-01T00:00:00+03:00", "2024-06-30T23:59:59+03:00", "time:week"},
		// 366 days minus a second is 52 whole weeks.
		{`"12mo"`, ``, "2023-07-01T00:00:00+03:00", "2024-06-30T23:59:59+03:00", "time:week"},
		{`"year"`, ``, "2024-01-01T00:00:00+02:00", "2024-12-31T23:59:59+02:00", "time:week"},
		{`"all"`, ``, "2024-01-15T00:00:00+02:00", "2024-07-10T23:59:59+03:00", "time:week"},
		// The clocks went from 03:00 to 04:00 on 2024-03-31.
		{`["2024-03-30","2024-03-31"]`, ``, "2024-03-30T00:00:00+02:00", "2024-03-31T23:59:59+03:00", "time:hour"},
		{`["2022-01-01","2024-01-31"]`, ``, "2022-01-01T00:00:00+02:00", "2024-01-31T23:59:59+02:00", "time:month"},
		// Reversed bounds are swapped; fractions are truncated.
		{`["2024-07-01T10:00:00.999Z","2024-07-01T09:00:00+00:00"]`, ``, "2024-07-01T12:00:00+03:00", "2024-07-01T13:00:00+03:00", "time:hour"},
		{`["2024-07-01 10:00:00+0300","2024-07-02T10:00:00+03"]`, ``, "2024-07-01T10:00:00+03:00", "2024-07-02T10:00:00+03:00", "time:hour"},
		// Trimmed to now: the day to the end of the current hour, month and
		// year to the end of today.
		{`"day"`, `"include":{"trim_relative_date_range":true},`, "2024-07-10T00:00:00+03:00", "2024-07-10T15:59:59+03:00", "time:hour"},
		{`"month"`, `"include":{"trim_relative_date_range":true},`, "2024-07-01T00:00:00+03:00", "2024-07-10T23:59:59+03:00", "time:day"},
		{`"year"`, `"include":{"trim_relative_date_range":true},`, "2024-01-01T00:00:00+02:00", "2024-07-10T23:59:59+03:00", "time:week"},
		{`"7d"`, `"include":{"trim_relative_date_range":true},`, "2024-07-03T00:00:00+03:00", "2024-07-09T23:59:59+03:00", "time:day"},
	}
	for _, c := range cases {
		body := `{"site_id":"example.com","metrics":["visitors"],` + c.include + `"dimensions":["time"],"date_range":` + c.dateRange + `}`
		q, err := Parse([]byte(body), site, now)
		if err != nil {
			t.Errorf("%s: %v", c.dateRange, err)
			continue
		}
		if f, l := q.isoInZone(q.From), q.isoInZone(q.Last()); f != c.wantFirst || l != c.wantLast {
			t.Errorf("%s %s: range %s .. %s; want %s .. %s", c.dateRange, c.include, f, l, c.wantFirst, c.wantLast)
		}
		if q.Dimensions[0] != c.wantTime {
			t.Errorf("%s: time is %s; want %s", c.dateRange, q.Dimensions[0], c.wantTime)
		}
		if q.To.Sub(q.From) <= 0 || q.To.Nanosecond() != 0 {
			t.Errorf("%s: bad bounds %v %v", c.dateRange, q.From, q.To)
		}
	}
}

func TestDateRangeUTCAndGaps(t *testing.T) {
	utc := Site{Domain: "example.com", Timezone: "Etc/UTC"}
	q, err := Parse([]byte(`{"site_id":"example.com","metrics":["visitors"],"date_range":"day"}`), utc, now)
	if err != nil {
		t.Fatal(err)
	}
	// Elixir prints "Z" for Etc/UTC only.
	if f, l := q.isoInZone(q.From), q.isoInZone(q.Last()); f != "2024-07-10T00:00:00Z" || l != "2024-07-10T23:59:59Z" {
		t.Errorf("got %s .. %s", f, l)
	}
	london := Site{Domain: "example.com", Timezone: "Europe/London"}
	q, _ = Parse([]byte(`{"site_id":"example.com","metrics":["visitors"],"date_range":["2024-01-02","2024-01-02"]}`), london, now)
	if f := q.isoInZone(q.From); f != "2024-01-02T00:00:00+00:00" {
		t.Errorf("London: got %s", f)
	}
	// Chile springs forward at midnight: 2024-09-08 00:00 does not exist,
	// the day starts at 01:00 (just after the gap). It falls back at
	// midnight too: 2024-04-06 23:59:59 happens twice, the last second of
	// that day is the first of them.
	chile := Site{Domain: "example.com", Timezone: "America/Santiago"}
	q, _ = Parse([]byte(`{"site_id":"example.com","metrics":["visitors"],"date_range":["2024-09-08","2024-09-08"]}`), chile, now)
	if f, l := q.isoInZone(q.From), q.isoInZone(q.Last()); f != "2024-09-08T01:00:00-03:00" || l != "2024-09-08T23:59:59-03:00" {
		t.Errorf("gap: got %s .. %s", f, l)
	}
	q, _ = Parse([]byte(`{"site_id":"example.com","metrics":["visitors"],"date_range":["2024-04-06","2024-04-06"]}`), chile, now)
	if f, l := q.isoInZone(q.From), q.isoInZone(q.Last()); f != "2024-04-06T00:00:00-03:00" || l != "2024-04-06T23:59:59-03:00" {
		t.Errorf("overlap: got %s .. %s", f, l)
	}
	if got := q.Last().Sub(q.From).Hours(); got < 23.99 || got > 24 {
		t.Errorf("overlap day spans %v hours before its second 23:00", got)
	}
}
