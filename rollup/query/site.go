package query

import "time"

// SiteMetrics are a site's metrics over a range (or for one breakdown
// value); the package doc defines each. Visitors is an estimate.
type SiteMetrics struct {
	Visitors      uint64  `json:"visitors"`
	Visits        int64   `json:"visits"`
	Pageviews     int64   `json:"pageviews"`
	ViewsPerVisit float64 `json:"views_per_visit"`
	BounceRate    float64 `json:"bounce_rate"`    // percent, 0-100
	VisitDuration float64 `json:"visit_duration"` // seconds
	TimeOnPage    float64 `json:"time_on_page"`   // seconds
	ScrollDepth   float64 `json:"scroll_depth"`   // percent, 0-100
	Events        int64   `json:"events"`
	BotEvents     int64   `json:"bot_events"`
}

// SitePoint is one bucket of a site's time series.
type SitePoint struct {
	T time.Time `json:"t"`
	SiteMetrics
}

// SiteBreakdownRow is one value of a site breakdown.
type SiteBreakdownRow struct {
	Value string `json:"value"` // "" is none (direct, unknown)
	SiteMetrics
	// Share is this value's part of the dimension's primary count:
	// pageviews for page, events for event, visits otherwise (0-1).
	Share float64 `json:"share"`
}

// SiteBreakdown answers GET /v1/sites/{id}/stats/breakdown.
type SiteBreakdown struct {
	Dimension string             `json:"dimension"`
	Total     int64              `json:"total"`
	Results   []SiteBreakdownRow `json:"results"`
	Other     int64              `json:"other"` // primary count past the limit
	Estimated []string           `json:"estimated"`
	// FromRawEvents is set when the filters could not be answered from
	// the rollups: the numbers are exact, from the raw events.
	FromRawEvents bool `json:"from_raw_events,omitempty"`
	// DroppedEvents: events of the site the edges dropped unwritten in
	// the hours of the range (see SiteAggregateAnswer).
	DroppedEvents int64 `json:"dropped_events"`
}

// SiteRealtime answers GET /v1/sites/{id}/stats/realtime, from the raw
// events of the last half hour.
type SiteRealtime struct {
	// CurrentVisitors is exact: distinct visitors with a non-bot event in
	// the last 5 minutes.
	CurrentVisitors   int           `json:"current_visitors"`
	Pageviews5Minutes int64         `json:"pageviews_last_5_minutes"`
	Pageviews30Min    int64         `json:"pageviews_last_30_minutes"`
	TopPages          []RealtimeRow `json:"top_pages"` // by pageviews in the last 5 minutes
}

// RealtimeRow is a value with a count.
type RealtimeRow struct {
	Value     string `json:"value"`
	Pageviews int64  `json:"pageviews"`
}

// Heatmap answers GET /v1/sites/{id}/stats/heatmap: a site's traffic by
// day of the week (Monday first) and hour of the day in its zone, summed
// over the range. Each cell is the sum, over the range's hours that fall
// on that weekday and hour, of Plausible's time:hour numbers: pageviews in
// the hour, and visits active in the hour (a visit counts in every hour
// from its first to its last event, Plausible's smeared sessions).
type Heatmap struct {
	From      time.Time     `json:"from"`
	To        time.Time     `json:"to"`
	Timezone  string        `json:"timezone"`
	Weekdays  [7]string     `json:"weekdays"`
	Pageviews [7][24]int64  `json:"pageviews"`
	Visits    [7][24]int64  `json:"visits"`
	Max       HeatmapTotals `json:"max"`   // the largest cell of each
	Total     HeatmapTotals `json:"total"` // pageviews in the range; visits summed over cells
	// HoursFrom is the first hour counted. Hour rows are kept for the hour
	// tier's retention (30 days by default): a range reaching further back
	// is counted from there, and Clipped says so.
	HoursFrom time.Time `json:"hours_from"`
	Clipped   bool      `json:"clipped"`
}

// HeatmapTotals are a pageview and a visit number.
type HeatmapTotals struct {
	Pageviews int64 `json:"pageviews"`
	Visits    int64 `json:"visits"`
}

// SiteGoals answers GET /v1/sites/{id}/stats/goals: every goal of the site
// with its conversions over the range, as Plausible's goal breakdown
// (event:goal with visitors, events and conversion_rate) gives them.
type SiteGoals struct {
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	Timezone string    `json:"timezone"`
	// TotalVisitors is every visitor of the range: the conversion rate's
	// denominator.
	TotalVisitors uint64     `json:"total_visitors"`
	Goals         []GoalStat `json:"goals"` // most converting visitors first
	Estimated     []string   `json:"estimated"`
}

// GoalStat is one goal's numbers.
type GoalStat struct {
	ID          string  `json:"id"`
	DisplayName string  `json:"display_name"`
	GoalType    string  `json:"goal_type"` // "event" or "page"
	EventName   *string `json:"event_name"`
	PagePath    *string `json:"page_path"`
	// Visitors converted: the union of the visitors of the goal's event
	// name, or of every page its pattern matches.
	Visitors uint64 `json:"visitors"`
	// Events are the completions: custom events of the name, or
	// pageviews of the matching pages.
	Events int64 `json:"events"`
	// ConversionRate is Visitors / TotalVisitors in percent, two decimals
	// (half to even), 0 without visitors.
	ConversionRate float64 `json:"conversion_rate"`
}
