package plausible

import (
	"strings"
)

// leafPos is where a leaf sits in its filter tree: how many nodes are
// above it, and how many of those are has_done/has_not_done.
type leafPos struct {
	depth, behavioral int
}

func walkLeaves(filters []Filter, fn func(*Filter, leafPos)) {
	var walk func(fs []Filter, pos leafPos)
	walk = func(fs []Filter, pos leafPos) {
		for i := range fs {
			f := &fs[i]
			if f.IsLeaf() {
				fn(f, pos)
				continue
			}
			next := leafPos{depth: pos.depth + 1, behavioral: pos.behavioral}
			if f.Op == OpHasDone || f.Op == OpHasNotDone {
				next.behavioral++
			}
			walk(f.Children, next)
		}
	}
	walk(filters, leafPos{})
}

type behavioralOption uint8

const (
	behavioralAny behavioralOption = iota
	behavioralIgnore
)

// filterDimensions is Filters.dimensions_used_in_filters: the leaves'
// dimensions in tree order, at depths [minDepth, maxDepth].
func filterDimensions(filters []Filter, minDepth, maxDepth int, b behavioralOption) []string {
	var out []string
	walkLeaves(filters, func(f *Filter, pos leafPos) {
		if pos.depth < minDepth || pos.depth > maxDepth {
			return
		}
		if b == behavioralIgnore && pos.behavioral > 0 {
			return
		}
		out = append(out, f.Dimension)
	})
	return out
}

const anyDepth = 1 << 30

func filteringOn(filters []Filter, dim string, b behavioralOption) bool {
	for _, d := range filterDimensions(filters, 0, anyDepth, b) {
		if d == dim {
			return true
		}
	}
	return false
}

// toplevelFilter is Filters.get_toplevel_filter: the first top-level leaf
// whose dimension starts with prefix.
func toplevelFilter(filters []Filter, prefix string) *Filter {
	for i := range filters {
		if filters[i].IsLeaf() && strings.HasPrefix(filters[i].Dimension, prefix) {
			return &filters[i]
		}
	}
	return nil
}

func isMetric(s string) bool { return oneOf(s, publicMetrics...) }

func has(list []string, s string) bool { return oneOf(s, list...) }

// validate runs QueryBuilder.build's checks in Plausible's order.
func validate(q *Query, orderBy []Order, orderGiven bool) error {
	if orderGiven {
		valid := append(append([]string{}, q.Metrics...), q.Dimensions...)
		for _, o := range orderBy {
			if has(valid, o.Key) {
				continue
			}
			dir := ":asc"
			if o.Desc {
				dir = ":desc"
			}
			key := inspect(o.Key)
			if isMetric(o.Key) {
				key = ":" + o.Key
			}
			return queryErr("Invalid order_by entry '{%s, %s}'. Entry is not a queried metric or dimension.", key, dir)
		}
	}
	for _, d := range filterDimensions(q.Filters, 1, anyDepth, behavioralIgnore) {
		if d == "event:goal" || d == "event:hostname" {
			return queryErr("Invalid filters. Dimension `%s` can only be filtered at the top level.", d)
		}
	}
	if q.HasMetric("conversion_rate") || q.HasMetric("group_conversion_rate") {
		for _, d := range filterDimensions(q.Filters, 1, anyDepth, behavioralAny) {
			if strings.HasPrefix(d, "event:props:") {
				return &QueryError{Message: "Invalid filters. When `conversion_rate` or `group_conversion_rate` metrics are used, custom property filters can only be used on top level."}
			}
		}
	}
	var behavioralErr error
	walkLeaves(q.Filters, func(f *Filter, pos leafPos) {
		switch {
		case behavioralErr != nil || pos.behavioral == 0:
		case pos.behavioral > 1:
			behavioralErr = &QueryError{Message: "Invalid filters. Behavioral filters (has_done, has_not_done) cannot be nested."}
		case !strings.HasPrefix(f.Dimension, "event:"):
			behavioralErr = &QueryError{Message: "Invalid filters. Behavioral filters (has_done, has_not_done) can only be used with event dimension filters."}
		}
	})
	if behavioralErr != nil {
		return behavioralErr
	}
	var goalErr error
	walkLeaves(q.Filters, func(f *Filter, _ leafPos) {
		if goalErr != nil || f.Op != OpIs || f.Dimension != "event:goal" || f.modifier != modNone {
			return
		}
		for _, c := range f.Values {
			if !q.goalConfigured(c) {
				goalErr = queryErr("Invalid filters. The goal `%s` is not configured for this site. Find out how to configure goals here: https://plausible.io/docs/stats-api#filtering-by-goals", c)
				return
			}
		}
	})
	if goalErr != nil {
		return goalErr
	}
	for _, m := range q.Metrics {
		if err := validateMetric(q, m); err != nil {
			return err
		}
	}
	if err := validateMetricDimensionConflict(q.Metrics, q.Dimensions); err != nil {
		return err
	}
	if q.Include.TimeLabels && q.TimeDimension() == "" {
		return &QueryError{Message: "Invalid include.time_labels: requires a time dimension."}
	}
	return nil
}

func (q *Query) goalConfigured(name string) bool {
	for _, g := range q.goals {
		if g.name == name {
			return true
		}
	}
	return false
}

func validateMetric(q *Query, m string) error {
	switch m {
	case "conversion_rate", "group_conversion_rate":
		if !has(q.Dimensions, "event:goal") && !filteringOn(q.Filters, "event:goal", behavioralIgnore) {
			return queryErr("Metric `%s` can only be queried with event:goal filters or dimensions.", m)
		}
	case "scroll_depth":
		if !has(q.Dimensions, "event:page") && toplevelFilter(q.Filters, "event:page") == nil {
			return queryErr("Metric `%s` can only be queried with event:page filters or dimensions.", m)
		}
	case "time_on_page":
		if !has(q.Dimensions, "event:page") && !filteringOn(q.Filters, "event:page", behavioralIgnore) {
			return queryErr("Metric `%s` can only be queried with event:page filters or dimensions.", m)
		}
	case "views_per_visit":
		if filteringOn(q.Filters, "event:page", behavioralIgnore) {
			return queryErr("Metric `%s` cannot be queried with a filter on `event:page`.", m)
		}
		if len(q.Dimensions) > 0 {
			return queryErr("Metric `%s` cannot be queried with `dimensions`.", m)
		}
	}
	return nil
}

// Table classes (stats/table_decider.ex).
type scope uint8

const (
	scopeEither scope = iota
	scopeEvent
	scopeSession
)

func metricScope(m string) scope {
	switch m {
	case "pageviews", "events", "scroll_depth", "time_on_page":
		return scopeEvent
	case "bounce_rate", "visit_duration", "views_per_visit":
		return scopeSession
	}
	return scopeEither
}

func dimensionScope(d string) scope {
	switch {
	case strings.HasPrefix(d, "event:"):
		return scopeEvent
	case d == "visit:entry_page", d == "visit:entry_page_hostname", d == "visit:exit_page", d == "visit:exit_page_hostname":
		return scopeSession
	}
	return scopeEither
}

func partitionBy(values []string, f func(string) scope) (event, session, either []string) {
	for _, v := range values {
		switch f(v) {
		case scopeEvent:
			event = append(event, v)
		case scopeSession:
			session = append(session, v)
		default:
			either = append(either, v)
		}
	}
	return
}

func backticked(list []string) string {
	parts := make([]string, len(list))
	for i, s := range list {
		parts[i] = "`" + s + "`"
	}
	return strings.Join(parts, ", ")
}

// validateMetricDimensionConflict is
// TableDecider.validate_no_metrics_dimensions_conflict.
func validateMetricDimensionConflict(metrics, dims []string) error {
	eventMetrics, sessionMetrics, _ := partitionBy(metrics, metricScope)
	eventDims, sessionDims, _ := partitionBy(dims, dimensionScope)
	switch {
	case len(eventDims) == 1 && eventDims[0] == "event:page":
	case len(sessionMetrics) > 0 && len(eventDims) > 0:
		return queryErr("Session metric(s) %s cannot be queried along with event dimension(s) %s", backticked(sessionMetrics), backticked(eventDims))
	case len(eventMetrics) > 0 && len(sessionDims) > 0:
		return queryErr("Event metric(s) %s cannot be queried along with session dimension(s) %s", backticked(eventMetrics), backticked(sessionDims))
	}
	return nil
}
