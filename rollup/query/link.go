package query

import "time"

// LinkTotals are a link's numbers over a range.
type LinkTotals struct {
	Clicks         int64  `json:"clicks"`
	UniqueVisitors uint64 `json:"unique_visitors"` // estimate
	BotClicks      int64  `json:"bot_clicks"`
}

// LinkPoint is one bucket of a link's series; T is its start in the
// query's zone.
type LinkPoint struct {
	T              time.Time `json:"t"`
	Clicks         int64     `json:"clicks"`
	UniqueVisitors uint64    `json:"unique_visitors"` // estimate
}

// LinkStats answers GET /v1/links/{code}/stats.
type LinkStats struct {
	Code        string      `json:"code"`
	From        time.Time   `json:"from"`
	To          time.Time   `json:"to"`
	Timezone    string      `json:"timezone"`
	Granularity Granularity `json:"granularity"`
	Totals      LinkTotals  `json:"totals"`
	Series      []LinkPoint `json:"series"`
	// Estimated names the fields that are HyperLogLog estimates.
	Estimated []string `json:"estimated"`
	// DroppedEvents is how many clicks of the link in the hours the range
	// touches the edges dropped before writing them (Backend.DroppedEvents): the
	// numbers above are short by that much.
	DroppedEvents int64 `json:"dropped_events"`
}

// LinkBreakdownRow is one value of a link breakdown.
type LinkBreakdownRow struct {
	Value          string  `json:"value"` // "" is none (direct, unknown)
	Clicks         int64   `json:"clicks"`
	UniqueVisitors uint64  `json:"unique_visitors"` // estimate
	Share          float64 `json:"share"`           // of all clicks in the range, 0-1
}

// LinkBreakdown answers GET /v1/links/{code}/stats/breakdown.
type LinkBreakdown struct {
	Dimension string             `json:"dimension"`
	Total     int64              `json:"total"`
	Results   []LinkBreakdownRow `json:"results"`
	// Other is the clicks of the values past the limit.
	Other         int64    `json:"other"`
	Estimated     []string `json:"estimated"`
	DroppedEvents int64    `json:"dropped_events"` // as in LinkStats
}

// RecentClick is one click in a link's realtime answer.
type RecentClick struct {
	Time     time.Time `json:"time"`
	Country  string    `json:"country"`
	Device   string    `json:"device"`
	Referrer string    `json:"referrer"`
}

// LinkRealtime answers GET /v1/links/{code}/stats/realtime: non-bot clicks
// in the windows ending now, straight from the raw events.
type LinkRealtime struct {
	LastMinute   int64         `json:"last_minute"`
	Last5Minutes int64         `json:"last_5_minutes"`
	LastHour     int64         `json:"last_hour"`
	Recent       []RecentClick `json:"recent"` // newest first
}

// LinkOverview answers GET /v1/links/{code}/stats/overview: the numbers a
// link's owner looks at first, in one request. Days are days of Timezone.
// Last7Days and Last30Days end yesterday, as Plausible's 7d and 30d do;
// Previous7Days is the week before Last7Days, for WeeklyGrowth.
type LinkOverview struct {
	Code          string         `json:"code"`
	Timezone      string         `json:"timezone"`
	Now           time.Time      `json:"now"`
	Today         OverviewWindow `json:"today"` // midnight to now
	Yesterday     OverviewWindow `json:"yesterday"`
	Last7Days     OverviewWindow `json:"last_7_days"`
	Previous7Days OverviewWindow `json:"previous_7_days"`
	Last30Days    OverviewWindow `json:"last_30_days"`
	// AllTimeClicks is exact: the counter the click limit is checked
	// against, kept whatever the retention of the other tiers.
	AllTimeClicks int64 `json:"all_time_clicks"`
	// DailyGrowth is today's clicks so far against yesterday's, and
	// WeeklyGrowth the last 7 days against the 7 before, in percent with
	// one decimal (+25.0 is a quarter more); null when the earlier
	// period had no click.
	DailyGrowth  *float64 `json:"daily_growth"`
	WeeklyGrowth *float64 `json:"weekly_growth"`
	// LastClick is the newest non-bot click of the last 30 days, from the
	// raw events; null when there is none that recent (AllTimeClicks then
	// tells whether the link was ever clicked).
	LastClick *time.Time `json:"last_click"`
	// PeakHour is the hour of the day with the most clicks over the last
	// 30 days; null without clicks.
	PeakHour  *PeakHour `json:"peak_hour"`
	Estimated []string  `json:"estimated"`
}

// OverviewWindow is a link's numbers over [From, To).
type OverviewWindow struct {
	From           time.Time `json:"from"`
	To             time.Time `json:"to"`
	Clicks         int64     `json:"clicks"`
	UniqueVisitors uint64    `json:"unique_visitors"` // estimate
	// Coarse is set when part of the window is older than the hour tier
	// and was counted at whole days (rollup/DESIGN.md, "Tiers").
	Coarse bool `json:"coarse,omitempty"`
}

// PeakHour is an hour of the day (0-23 in the answer's zone) and the
// clicks in it over [From, To): the 720 hours of the hour tier up to now.
type PeakHour struct {
	Hour   int       `json:"hour"`
	Clicks int64     `json:"clicks"`
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
}
