package plausible

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// DefaultLimit is the page size when pagination.limit is not given.
const DefaultLimit = 10000

// Parse decodes and validates a POST /api/v2/query body for site, as
// Plausible's Query.parse_and_build does (stats/api_query_parser.ex, then
// stats/query_builder.ex and stats/query_optimizer.ex), relative to now.
// A query Plausible would refuse returns a *QueryError with Plausible's
// message. Parse does not compare site_id with site.Domain: the caller
// looked the site up by it (see SiteIDFromBody).
func Parse(body []byte, site Site, now time.Time) (*Query, error) {
	tzName := site.Timezone
	if tzName == "" {
		tzName = "Etc/UTC"
	}
	loc, err := time.LoadLocation(tzName)
	if err != nil {
		return nil, fmt.Errorf("cannot load timezone %q of site %q: %w", tzName, site.Domain, err)
	}
	raw, err := decodeJSON(body)
	if err != nil {
		return nil, queryErr("Invalid JSON body: %v", err)
	}
	if errs := querySchema.validate(raw, "#"); len(errs) > 0 {
		return nil, schemaError(errs)
	}
	params := raw.(map[string]any) // the schema requires an object

	q := &Query{SiteID: site.Domain, Timezone: loc, Now: now, site: site, tz: tzName}
	in, err := parseInputDateRange(params["date_range"])
	if err != nil {
		return nil, err
	}
	for _, m := range params["metrics"].([]any) {
		q.Metrics = append(q.Metrics, m.(string))
	}
	if q.Filters, err = parseFilters(params["filters"]); err != nil {
		return nil, err
	}
	if d, ok := params["dimensions"].([]any); ok {
		for _, x := range d {
			q.Dimensions = append(q.Dimensions, x.(string))
		}
	}
	orderBy, orderGiven := parseOrderBy(params["order_by"])
	q.Pagination = Pagination{Limit: DefaultLimit}
	if p, ok := params["pagination"].(map[string]any); ok {
		if v, ok := p["limit"]; ok {
			q.Pagination.Limit = intValue(v)
		}
		if v, ok := p["offset"]; ok {
			q.Pagination.Offset = intValue(v)
		}
	}
	if inc, ok := params["include"].(map[string]any); ok {
		q.Include = Include{
			TimeLabels:            inc["time_labels"] == true,
			Imports:               inc["imports"] == true,
			TotalRows:             inc["total_rows"] == true,
			TrimRelativeDateRange: inc["trim_relative_date_range"] == true,
		}
	}

	// QueryBuilder.build.
	if err := checkSegments(q.Filters); err != nil {
		return nil, err
	}
	first, last := in.build(site, loc, now)
	q.From, q.To = first, last.Add(time.Second)
	q.DateRange = in.shorthand
	q.goals = compileGoals(site.Goals)
	if err := validate(q, orderBy, orderGiven); err != nil {
		return nil, err
	}
	optimize(q, in, orderBy, orderGiven)
	if q.Include.TimeLabels && timeLabelCount(q) > maxTimeLabels {
		// Plausible would list them all; Waymark refuses to build millions.
		return nil, queryErr("Invalid include.time_labels: the range has more than %d time buckets.", maxTimeLabels)
	}
	return q, nil
}

// SiteIDFromBody returns the body's site_id, which the caller needs to find
// the Site before Parse, with Plausible's error when it is missing.
func SiteIDFromBody(body []byte) (string, error) {
	raw, err := decodeJSON(body)
	if err != nil {
		return "", queryErr("Invalid JSON body: %v", err)
	}
	if obj, ok := raw.(map[string]any); ok {
		if id, ok := obj["site_id"].(string); ok && id != "" {
			return id, nil
		}
	}
	return "", &QueryError{Message: "Missing site ID. Please provide the required site_id parameter with your request."}
}

func intValue(v any) int {
	switch x := v.(type) {
	case jsonInt:
		if x.v > int64(^uint(0)>>1) {
			return int(^uint(0) >> 1)
		}
		return int(x.v)
	case float64:
		return int(x)
	}
	return 0
}

// inputRange is a parsed date_range.
type inputRange struct {
	shorthand      string // "day", "month", "year", "all", "7d", "6mo"... or ""
	kind           rangeKind
	n              int
	fromDay, toDay day       // date ranges
	from, to       time.Time // datetime ranges
}

type rangeKind uint8

const (
	rangeDay rangeKind = iota
	rangeMonth
	rangeYear
	rangeAll
	rangeLastDays
	rangeLastMonths
	rangeDates
	rangeDatetimes
)

func parseInputDateRange(v any) (inputRange, error) {
	switch x := v.(type) {
	case string:
		r := inputRange{shorthand: x}
		switch x {
		case "day":
			r.kind = rangeDay
			return r, nil
		case "month":
			r.kind = rangeMonth
			return r, nil
		case "year":
			r.kind = rangeYear
			return r, nil
		case "all":
			r.kind = rangeAll
			return r, nil
		}
		// Integer.parse: a leading integer, then the unit.
		i := 0
		if i < len(x) && (x[i] == '+' || x[i] == '-') {
			i++
		}
		j := i
		for j < len(x) && x[j] >= '0' && x[j] <= '9' {
			j++
		}
		if j > i {
			n, err := strconv.Atoi(x[:j])
			if err != nil {
				n = 1 << 30 // a bignum: out of every bound below
			}
			switch unit := x[j:]; {
			case unit == "d" && n > 0 && n <= 5000:
				r.kind, r.n = rangeLastDays, n
				return r, nil
			case unit == "mo" && n > 0 && n <= 100:
				r.kind, r.n = rangeLastMonths, n
				return r, nil
			}
		}
		return r, queryErr("Invalid date_range %s", inspect(x))
	case []any:
		if len(x) == 2 {
			from, ok1 := x[0].(string)
			to, ok2 := x[1].(string)
			if ok1 && ok2 {
				fy, fm, fd, okf := parseISODate(from)
				ty, tm, td, okt := parseISODate(to)
				if okf && okt {
					return inputRange{kind: rangeDates, fromDay: dayOf(fy, fm, fd), toDay: dayOf(ty, tm, td)}, nil
				}
				f, okf := parseISODateTime(from)
				t, okt := parseISODateTime(to)
				if okf && okt && f.hasOffset && t.hasOffset {
					return inputRange{kind: rangeDatetimes, from: f.instant(), to: t.instant()}, nil
				}
				return inputRange{}, queryErr("Invalid date_range '%s'.", inspect(v))
			}
		}
	}
	return inputRange{}, queryErr("Invalid date_range %s", inspect(v))
}

// build returns the inclusive UTC bounds, whole seconds
// (QueryBuilder.build_datetime_range, DateTimeRange.new!).
func (r inputRange) build(site Site, loc *time.Location, now time.Time) (first, last time.Time) {
	today := localDay(loc, now.Unix())
	var from, to day
	switch r.kind {
	case rangeDay:
		from, to = today, today
	case rangeMonth:
		from, to = today.monthStart(), today.monthEnd()
	case rangeYear:
		y, _, _ := today.civil()
		from, to = dayOf(y, 1, 1), dayOf(y, 12, 31)
	case rangeAll:
		from, to = today, today
		if !site.StatsStart.IsZero() {
			from = localDay(loc, site.StatsStart.Unix())
		}
	case rangeLastDays:
		from, to = today-day(r.n), today-1
	case rangeLastMonths:
		from, to = today.addMonths(-r.n).monthStart(), today.addMonths(-1).monthEnd()
	case rangeDates:
		from, to = r.fromDay, r.toDay
	case rangeDatetimes:
		return orderedRange(r.from.Truncate(time.Second), r.to.Truncate(time.Second))
	}
	return orderedRange(dayBounds(from, to, loc))
}

// dayBounds is DateTimeRange.new!(first_date, last_date, tz): first_date
// 00:00:00 to last_date 23:59:59 in the site timezone.
func dayBounds(from, to day, loc *time.Location) (time.Time, time.Time) {
	return time.Unix(wallToUnix(from, 0, loc, true), 0).UTC(),
		time.Unix(wallToUnix(to, 86399, loc, false), 0).UTC()
}

// orderedRange swaps reversed bounds, as DateTimeRange.new!/2 does.
func orderedRange(a, b time.Time) (time.Time, time.Time) {
	if a.Before(b) {
		return a, b
	}
	return b, a
}

// parseFilters turns schema-valid filters into Filter trees, with the
// parser's own checks (ApiQueryParser.parse_filters).
func parseFilters(v any) ([]Filter, error) {
	list, _ := v.([]any)
	var out []Filter
	for _, f := range list {
		pf, err := parseFilter(f)
		if err != nil {
			return nil, err
		}
		out = append(out, pf)
	}
	return out, nil
}

func parseFilter(v any) (Filter, error) {
	arr, _ := v.([]any)
	op := ""
	if len(arr) > 0 {
		op, _ = arr[0].(string)
	}
	switch op {
	case OpAnd, OpOr:
		children, err := parseFilters(arr[1])
		return Filter{Op: op, Children: children}, err
	case OpNot, OpHasDone, OpHasNotDone:
		child, err := parseFilter(arr[1])
		return Filter{Op: op, Children: []Filter{child}}, err
	case OpIs, OpIsNot, OpContains, OpContainsNot, OpMatches, OpMatchesNot:
	default:
		return Filter{}, queryErr("Unknown operator for filter '%s'.", inspect(v))
	}
	invalid := queryErr("Invalid filter '%s'.", inspect(v))
	if len(arr) < 3 {
		return Filter{}, invalid
	}
	dim, _ := arr[1].(string)
	if !validFilterDimension(dim) {
		return Filter{}, invalid
	}
	clauses, ok := arr[2].([]any)
	if !ok {
		return Filter{}, invalid
	}
	f := Filter{Op: op, Dimension: dim, CaseSensitive: true, Values: make([]string, len(clauses))}
	allStrings, allInts := true, true
	for _, c := range clauses {
		_, isStr := c.(string)
		_, isInt := c.(jsonInt)
		allStrings = allStrings && isStr
		allInts = allInts && isInt
	}
	switch {
	case dim == "visit:city" && !allStrings && allInts:
	case dim == "visit:country" && allStrings && (op == OpIs || op == OpIsNot):
		for _, c := range clauses {
			if utf8.RuneCountInString(c.(string)) != 2 {
				return Filter{}, &QueryError{Message: "Invalid visit:country filter, visit:country needs to be a valid 2-letter country code."}
			}
		}
	case dim == "segment" && allInts:
	case allStrings && dim != "segment":
	default:
		return Filter{}, invalid
	}
	for i, c := range clauses {
		switch x := c.(type) {
		case string:
			f.Values[i] = x
		case jsonInt:
			f.Values[i] = x.text
			if f.intClauses == nil {
				f.intClauses = make([]bool, len(clauses))
			}
			f.intClauses[i] = true
		}
	}
	if len(arr) > 3 {
		mods, _ := arr[3].(map[string]any)
		f.modifier = modEmpty
		if cs, ok := mods["case_sensitive"].(bool); ok {
			f.modifier = modSet
			f.CaseSensitive = cs
		}
	}
	return f, nil
}

var eventProps = []string{"name", "page", "goal", "hostname"}

var visitProps = []string{
	"source", "channel", "referrer", "utm_medium", "utm_source", "utm_campaign", "utm_content", "utm_term",
	"screen", "device", "browser", "browser_version", "os", "os_version", "country", "region", "city",
	"country_name", "region_name", "city_name", "entry_page", "exit_page", "entry_page_hostname", "exit_page_hostname",
}

// validFilterDimension is parse_filter_dimension_string.
func validFilterDimension(dim string) bool {
	switch {
	case strings.HasPrefix(dim, "event:props:"):
		return len(dim) > len("event:props:")
	case strings.HasPrefix(dim, "event:"):
		return oneOf(dim[len("event:"):], eventProps...)
	case strings.HasPrefix(dim, "visit:"):
		return oneOf(dim[len("visit:"):], visitProps...)
	}
	return dim == "segment"
}

func parseOrderBy(v any) ([]Order, bool) {
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]Order, 0, len(list))
	for _, e := range list {
		pair := e.([]any)
		out = append(out, Order{Key: pair[0].(string), Desc: pair[1] == "desc"})
	}
	return out, true
}

// checkSegments: Waymark has no saved segments, so any segment filter
// fails the way a missing one does (Segments.Filters).
func checkSegments(filters []Filter) error {
	ids := 0
	walkLeaves(filters, func(f *Filter, _ leafPos) {
		if f.Dimension == "segment" && f.modifier == modNone {
			ids += len(f.Values)
		}
	})
	if ids > 10 {
		return &QueryError{Message: "Invalid filters. You can only use up to 10 segment filters in a query."}
	}
	if ids > 0 {
		return &QueryError{Message: "Invalid filters. Some segments don't exist or aren't accessible."}
	}
	return nil
}
