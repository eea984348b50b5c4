package clickhouse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Estimated names the answer fields that are estimates: ClickHouse's
// uniqCombined (DESIGN.md states its bound). Everything else is exact.
var Estimated = []string{"visitors"}

// Counts are one bucket's (or a range's) numbers. For a link, Clicks
// and BotClicks; for a site, Pageviews, Events (pageviews and custom
// events) and BotEvents (every bot site event). Visitors: distinct
// visitor hashes of the non-bot events, an estimate.
type Counts struct {
	Clicks    int64  `json:"clicks,omitempty"`
	BotClicks int64  `json:"bot_clicks,omitempty"`
	Pageviews int64  `json:"pageviews,omitempty"`
	Events    int64  `json:"events,omitempty"`
	BotEvents int64  `json:"bot_events,omitempty"`
	Visitors  uint64 `json:"visitors"`
}

// Day is one UTC day of a series.
type Day struct {
	Date string `json:"date"` // YYYY-MM-DD, UTC
	Counts
}

// Stats is a daily series and the range's totals (whose visitors are
// the range's distinct visitors, not the days' sum).
type Stats struct {
	From, To  time.Time
	Totals    Counts
	Series    []Day
	Estimated []string
}

// ErrBadRange is a range that is empty or not on whole UTC days.
var ErrBadRange = errors.New("range must be whole UTC days, from before to")

// Event kinds and the bot flag as the edges write them (ingest).
const (
	notBot       = "bitAnd(flags, 1) = 0"
	isBot        = "bitAnd(flags, 1) = 1"
	kindClick    = "kind = 1"
	kindPageview = "kind = 2"
	kindCounted  = "kind IN (2, 4)" // pageview, custom: Plausible's events
	kindSite     = "kind IN (2, 3, 4)"
)

// LinkStats returns a link's clicks, bot clicks and visitors per UTC day
// of [from, to) and in total. Events are read with FINAL, so a record
// stored twice by a retried insert counts once.
func (c *Client) LinkStats(ctx context.Context, code string, from, to time.Time) (*Stats, error) {
	where := "site = '' AND code = " + String(code) + " AND " + kindClick
	cols := "countIf(" + notBot + "), countIf(" + isBot + "), uniqCombinedIf(visitor, " + notBot + ")"
	return c.stats(ctx, where, cols, from, to, func(row []rawValue, k *Counts) error {
		var err [3]error
		k.Clicks, err[0] = row[0].int()
		k.BotClicks, err[1] = row[1].int()
		k.Visitors, err[2] = row[2].uint()
		return errors.Join(err[:]...)
	})
}

// SiteStats returns a site's pageviews, events, bot events and visitors
// per UTC day of [from, to) and in total. Bot events are every
// bot-flagged site event, engagement included, as the embedded store
// counts them. Visitors are the distinct hashes of its non-bot site
// events, engagement included (Plausible's events table).
func (c *Client) SiteStats(ctx context.Context, site string, from, to time.Time) (*Stats, error) {
	where := "site = " + String(site) + " AND code = '' AND " + kindSite
	cols := "countIf(" + kindPageview + " AND " + notBot + "), countIf(" + kindCounted + " AND " + notBot + "), " +
		"countIf(" + isBot + "), uniqCombinedIf(visitor, " + notBot + ")"
	return c.stats(ctx, where, cols, from, to, func(row []rawValue, k *Counts) error {
		var err [4]error
		k.Pageviews, err[0] = row[0].int()
		k.Events, err[1] = row[1].int()
		k.BotEvents, err[2] = row[2].int()
		k.Visitors, err[3] = row[3].uint()
		return errors.Join(err[:]...)
	})
}

func (c *Client) stats(ctx context.Context, where, cols string, from, to time.Time, scan func([]rawValue, *Counts) error) (*Stats, error) {
	from, to = from.UTC(), to.UTC()
	if !to.After(from) || !isMidnight(from) || !isMidnight(to) {
		return nil, fmt.Errorf("%w: [%s, %s)", ErrBadRange, from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	// time is the key's third column and the partition key's source, so
	// these bounds prune partitions and key ranges.
	where += " AND time >= " + DateTime(from) + " AND time < " + DateTime(to)
	st := &Stats{From: from, To: to, Estimated: Estimated}
	r, err := c.Query(ctx, "SELECT toString(toDate(time)) AS d, "+cols+" FROM events FINAL WHERE "+where+" GROUP BY d ORDER BY d")
	if err != nil {
		return nil, fmt.Errorf("cannot read the daily series: %w", err)
	}
	byDay := make(map[string]Counts, len(r.Data))
	for _, row := range r.Data {
		vals := rawRow(row)
		d, err := vals[0].str()
		if err != nil {
			return nil, err
		}
		var k Counts
		if err := scan(vals[1:], &k); err != nil {
			return nil, fmt.Errorf("cannot read the series of %s: %w", d, err)
		}
		byDay[d] = k
	}
	// ClickHouse 18.16 has no WITH FILL: days without events are added here.
	for d := from; d.Before(to); d = d.AddDate(0, 0, 1) {
		date := d.Format(time.DateOnly)
		st.Series = append(st.Series, Day{Date: date, Counts: byDay[date]})
	}
	r, err = c.Query(ctx, "SELECT "+cols+" FROM events FINAL WHERE "+where)
	if err != nil {
		return nil, fmt.Errorf("cannot read the totals: %w", err)
	}
	if len(r.Data) != 1 {
		return nil, fmt.Errorf("totals came as %d rows, want 1", len(r.Data))
	}
	if err := scan(rawRow(r.Data[0]), &st.Totals); err != nil {
		return nil, fmt.Errorf("cannot read the totals: %w", err)
	}
	return st, nil
}

func isMidnight(t time.Time) bool { return t.Equal(t.Truncate(24 * time.Hour)) }

// rawValue is one JSONCompact value.
type rawValue []byte

func rawRow[T ~[]byte](row []T) []rawValue {
	out := make([]rawValue, len(row))
	for i := range row {
		out[i] = rawValue(row[i])
	}
	return out
}

func (v rawValue) uint() (uint64, error) { return parseUint(v) }

func (v rawValue) int() (int64, error) {
	return strconv.ParseInt(strings.Trim(string(v), `"`), 10, 64)
}

func (v rawValue) str() (string, error) {
	s, err := strconv.Unquote(string(v))
	if err != nil {
		// JSON escapes Go's quoting does not know (ClickHouse writes "/"
		// as "\/").
		if json.Unmarshal(v, &s) == nil {
			return s, nil
		}
		return "", fmt.Errorf("cannot read string value %s: %w", v, err)
	}
	return s, nil
}
