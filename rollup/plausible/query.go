package plausible

import (
	"strings"
	"time"
)

// Filter operators and tree nodes (Op of a Filter).
const (
	OpIs          = "is"
	OpIsNot       = "is_not"
	OpContains    = "contains"
	OpContainsNot = "contains_not"
	OpMatches     = "matches"
	OpMatchesNot  = "matches_not"
	OpAnd         = "and"
	OpOr          = "or"
	OpNot         = "not"
	OpHasDone     = "has_done"
	OpHasNotDone  = "has_not_done"
)

// Filter is one node of a filter tree. A leaf has Dimension and Values; and
// and or have one or more Children; not, has_done and has_not_done exactly
// one.
type Filter struct {
	Op        string
	Dimension string
	// Values are the clauses; a row matches a leaf when any clause matches
	// (is_not and contains_not negate the whole). Integer clauses (only
	// visit:city takes them) are given in decimal.
	Values []string
	// CaseSensitive is false only with {"case_sensitive": false}.
	CaseSensitive bool
	Children      []Filter

	intClauses []bool   // which clauses were JSON integers, for the echo
	modifier   modifier // the 4th element as given, for the echo
}

type modifier uint8

const (
	modNone  modifier = iota // no 4th element
	modEmpty                 // {}
	modSet                   // {"case_sensitive": bool}
)

// IsLeaf says whether f compares a dimension (rather than combining
// filters).
func (f *Filter) IsLeaf() bool { return f.Dimension != "" }

// Order is one order_by entry: a metric or dimension of the query.
type Order struct {
	Key  string
	Desc bool
}

// Pagination is the window of result rows returned.
type Pagination struct {
	Limit, Offset int
}

// Include holds the include options.
type Include struct {
	TimeLabels            bool
	Imports               bool
	TotalRows             bool
	TrimRelativeDateRange bool
}

// Query is a parsed and validated /api/v2/query body, after Plausible's
// optimizer steps (time dimension resolved, default order_by, hostname
// filters extended to visits, relative range trimmed).
type Query struct {
	SiteID  string // the site's domain, echoed as query.site_id
	Metrics []string
	// Dimensions in query order, "time" resolved to time:hour, time:day,
	// time:week or time:month.
	Dimensions []string
	// Filters is the top-level list (an implicit and), including the
	// entry/exit hostname filters Plausible adds for an event:hostname
	// filter.
	Filters []Filter
	// From and To bound the range in UTC: From <= t < To, whole seconds.
	// Plausible's inclusive last instant is To minus one second.
	From, To time.Time
	Timezone *time.Location
	OrderBy  []Order
	// Pagination has Limit 10000 and Offset 0 unless given.
	Pagination Pagination
	Include    Include
	// DateRange is the date_range as given when it is a string ("day",
	// "7d", "6mo", "all"...), "" for explicit dates or datetimes.
	DateRange string
	// Now is the clock reading the relative range was built from.
	Now time.Time

	site  Site
	tz    string         // IANA name as configured, for the echo's "Z"
	goals []compiledGoal // all site goals
	// goalDims are the goals considered by the event:goal dimension: the
	// site's goals narrowed by the top-level event:goal filters.
	goalDims []int
}

// Site returns the site the query was parsed for.
func (q *Query) Site() Site { return q.site }

// Last is Plausible's inclusive upper bound of the range.
func (q *Query) Last() time.Time { return q.To.Add(-time.Second) }

// TimeDimension is the query's time dimension, or "".
func (q *Query) TimeDimension() string {
	for _, d := range q.Dimensions {
		if strings.HasPrefix(d, "time") {
			return d
		}
	}
	return ""
}

// SimpleFilters returns the top-level leaves when the filter list is a
// plain and of leaves (no and/or/not/has_done trees), and ok false
// otherwise.
func (q *Query) SimpleFilters() (leaves []Filter, ok bool) {
	for _, f := range q.Filters {
		if !f.IsLeaf() {
			return nil, false
		}
	}
	return q.Filters, true
}

// HasMetric says whether m is among the query's metrics.
func (q *Query) HasMetric(m string) bool {
	for _, x := range q.Metrics {
		if x == m {
			return true
		}
	}
	return false
}

// DimensionGoals are the goals an event:goal dimension groups by, in
// their row order: the site's goals narrowed by the top-level event:goal
// filters.
func (q *Query) DimensionGoals() []Goal {
	out := make([]Goal, len(q.goalDims))
	for i, gi := range q.goalDims {
		out[i] = q.goals[gi].Goal
	}
	return out
}
