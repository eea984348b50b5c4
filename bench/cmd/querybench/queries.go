package main

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// query is one question asked of both servers, and how to check each
// answer against the truth.
type query struct {
	Name      string `json:"name"`
	NodePath  string `json:"node_path"`
	SQL       string `json:"clickhouse_sql"`
	checkNode func([]byte, *truth) (Check, error)
	checkCH   func(string, *truth) (Check, error)
}

// Check says how much of an answer agrees with the truth: counts must be
// exact; unique visitors are estimates on both sides, so their largest
// relative error is reported, not judged.
type Check struct {
	Matched         int      `json:"matched"` // days or rows whose count is exact
	Of              int      `json:"of"`
	MaxVisitorError float64  `json:"max_visitor_error"` // series only: |estimate - exact| / exact, worst day
	Misses          []string `json:"misses,omitempty"`  // the first few counts that are not exact, as "where: got N, want M"
}

// maxMisses is how many inexact counts a check keeps to show.
const maxMisses = 3

// miss records an inexact count (the first maxMisses of them).
func (c *Check) miss(where string, got, want int64) {
	if len(c.Misses) < maxMisses {
		c.Misses = append(c.Misses, fmt.Sprintf("%s: got %d, want %d", where, got, want))
	}
}

func (c Check) String() string {
	s := fmt.Sprintf("%d/%d exact", c.Matched, c.Of)
	if c.MaxVisitorError > 0 {
		s += fmt.Sprintf(", visitors within %.1f%%", 100*c.MaxVisitorError)
	}
	if len(c.Misses) > 0 {
		s += " (" + strings.Join(c.Misses, "; ") + ")"
	}
	return s
}

// OK reports whether every count matched.
func (c Check) OK() bool { return c.Of > 0 && c.Matched == c.Of }

// buildQueries makes the four queries over days [from, to) for the hot
// link code and the hot site id.
func buildQueries(code, site string, from, to time.Time) []query {
	lastDay := to.AddDate(0, 0, -1).Format(time.DateOnly)
	rng := url.Values{"from": {from.Format(time.DateOnly)}, "to": {lastDay}}
	chRange := fmt.Sprintf("time >= toDateTime('%s') AND time < toDateTime('%s')", from.Format(time.DateTime), to.Format(time.DateTime))
	link := fmt.Sprintf("site = '' AND code = '%s' AND bitAnd(flags, 1) = 0 AND %s", code, chRange)
	pages := fmt.Sprintf("site = '%s' AND code = '' AND kind = 2 AND bitAnd(flags, 1) = 0 AND %s", site, chRange)
	with := func(extra url.Values) string {
		q := url.Values{}
		for k, v := range rng {
			q[k] = v
		}
		for k, v := range extra {
			q[k] = v
		}
		return q.Encode()
	}
	return []query{
		{
			Name:      "link: 30-day daily series",
			NodePath:  "/v1/links/" + code + "/stats?" + with(url.Values{"granularity": {"day"}, "tz": {"UTC"}}),
			SQL:       "SELECT toDate(time) AS d, count(), uniq(visitor) FROM events WHERE " + link + " GROUP BY d ORDER BY d",
			checkNode: checkNodeLinkSeries, checkCH: func(b string, t *truth) (Check, error) { return checkCHSeries(b, t, t.clicks, t.linkVisitors) },
		},
		{
			Name:      "link: breakdown by country",
			NodePath:  "/v1/links/" + code + "/stats/breakdown?" + with(url.Values{"dimension": {"country"}, "tz": {"UTC"}, "limit": {"10"}}),
			SQL:       "SELECT country, count() AS c, uniq(visitor) FROM events WHERE " + link + " GROUP BY country ORDER BY c DESC, country LIMIT 10",
			checkNode: checkNodeLinkBreakdown, checkCH: func(b string, t *truth) (Check, error) { return checkCHBreakdown(b, t.countries) },
		},
		{
			Name:      "site: 30-day daily series",
			NodePath:  "/v1/sites/" + site + "/stats/timeseries?" + with(url.Values{"granularity": {"day"}}),
			SQL:       "SELECT toDate(time) AS d, count(), uniq(visitor) FROM events WHERE " + pages + " GROUP BY d ORDER BY d",
			checkNode: checkNodeSiteSeries, checkCH: func(b string, t *truth) (Check, error) { return checkCHSeries(b, t, t.pageviews, t.siteVisitors) },
		},
		{
			Name:      "site: breakdown by page",
			NodePath:  "/v1/sites/" + site + "/stats/breakdown?" + with(url.Values{"dimension": {"page"}, "limit": {"10"}}),
			SQL:       "SELECT path, count() AS c, uniq(visitor) FROM events WHERE " + pages + " GROUP BY path ORDER BY c DESC, path LIMIT 10",
			checkNode: checkNodeSiteBreakdown, checkCH: func(b string, t *truth) (Check, error) { return checkCHBreakdown(b, t.pages) },
		},
	}
}

func relErr(est float64, exact int) float64 {
	if exact == 0 {
		return 0
	}
	return math.Abs(est-float64(exact)) / float64(exact)
}

// dayIndex maps a series point's time to its day in the truth.
func dayIndex(t *truth, at time.Time) int {
	return int(at.Sub(t.start) / (24 * time.Hour))
}

func checkNodeLinkSeries(b []byte, t *truth) (Check, error) {
	var ans struct {
		Series []struct {
			T              time.Time `json:"t"`
			Clicks         int64     `json:"clicks"`
			UniqueVisitors uint64    `json:"unique_visitors"`
		} `json:"series"`
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		return Check{}, fmt.Errorf("cannot decode the link series: %w", err)
	}
	c := Check{Of: t.days}
	for _, p := range ans.Series {
		d := dayIndex(t, p.T)
		if d < 0 || d >= t.days {
			continue
		}
		if p.Clicks != t.clicks[d] {
			c.miss(p.T.Format(time.DateOnly), p.Clicks, t.clicks[d])
			continue
		}
		c.Matched++
		c.MaxVisitorError = max(c.MaxVisitorError, relErr(float64(p.UniqueVisitors), t.linkVisitors[d]))
	}
	return c, nil
}

func checkNodeSiteSeries(b []byte, t *truth) (Check, error) {
	var ans struct {
		Series []struct {
			T         time.Time `json:"t"`
			Pageviews int64     `json:"pageviews"`
			Visitors  uint64    `json:"visitors"`
		} `json:"series"`
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		return Check{}, fmt.Errorf("cannot decode the site series: %w", err)
	}
	c := Check{Of: t.days}
	for _, p := range ans.Series {
		d := dayIndex(t, p.T)
		if d < 0 || d >= t.days {
			continue
		}
		if p.Pageviews != t.pageviews[d] {
			c.miss(p.T.Format(time.DateOnly), p.Pageviews, t.pageviews[d])
			continue
		}
		c.Matched++
		c.MaxVisitorError = max(c.MaxVisitorError, relErr(float64(p.Visitors), t.siteVisitors[d]))
	}
	return c, nil
}

func checkNodeLinkBreakdown(b []byte, t *truth) (Check, error) {
	var ans struct {
		Results []struct {
			Value  string `json:"value"`
			Clicks int64  `json:"clicks"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		return Check{}, fmt.Errorf("cannot decode the link breakdown: %w", err)
	}
	c := Check{Of: min(10, len(t.countries))}
	for _, r := range ans.Results {
		if r.Clicks == t.countries[r.Value] && r.Clicks > 0 {
			c.Matched++
		} else {
			c.miss(strconv.Quote(r.Value), r.Clicks, t.countries[r.Value])
		}
	}
	return c, nil
}

func checkNodeSiteBreakdown(b []byte, t *truth) (Check, error) {
	var ans struct {
		Results []struct {
			Value     string `json:"value"`
			Pageviews int64  `json:"pageviews"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		return Check{}, fmt.Errorf("cannot decode the site breakdown: %w", err)
	}
	c := Check{Of: min(10, len(t.pages))}
	for _, r := range ans.Results {
		if r.Pageviews == t.pages[r.Value] && r.Pageviews > 0 {
			c.Matched++
		} else {
			c.miss(strconv.Quote(r.Value), r.Pageviews, t.pages[r.Value])
		}
	}
	return c, nil
}

// tsvRows splits a TabSeparated answer into rows of fields.
func tsvRows(body string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
		if line != "" {
			rows = append(rows, strings.Split(line, "\t"))
		}
	}
	return rows
}

func checkCHSeries(body string, t *truth, counts []int64, visitors []int) (Check, error) {
	c := Check{Of: t.days}
	for _, row := range tsvRows(body) {
		if len(row) != 3 {
			return c, fmt.Errorf("cannot read series row %q", row)
		}
		day, err1 := time.Parse(time.DateOnly, row[0])
		n, err2 := strconv.ParseInt(row[1], 10, 64)
		u, err3 := strconv.ParseFloat(row[2], 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return c, fmt.Errorf("cannot read series row %q", row)
		}
		d := dayIndex(t, day)
		if d < 0 || d >= t.days {
			continue
		}
		if n != counts[d] {
			c.miss(row[0], n, counts[d])
			continue
		}
		c.Matched++
		c.MaxVisitorError = max(c.MaxVisitorError, relErr(u, visitors[d]))
	}
	return c, nil
}

func checkCHBreakdown(body string, truth map[string]int64) (Check, error) {
	c := Check{Of: min(10, len(truth))}
	for _, row := range tsvRows(body) {
		if len(row) != 3 {
			return c, fmt.Errorf("cannot read breakdown row %q", row)
		}
		n, err := strconv.ParseInt(row[1], 10, 64)
		if err != nil {
			return c, fmt.Errorf("cannot read breakdown row %q", row)
		}
		if n == truth[row[0]] && n > 0 {
			c.Matched++
		} else {
			c.miss(strconv.Quote(row[0]), n, truth[row[0]])
		}
	}
	return c, nil
}
