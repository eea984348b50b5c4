package plausible

import (
	"regexp"
	"slices"
	"strings"
)

// The query schema.

func node() *schemaNode { return &schemaNode{minItems: -1, maxItems: -1} }

func typed(types ...string) *schemaNode {
	n := node()
	n.types = types
	return n
}

func constant(v string) *schemaNode {
	n := node()
	n.hasConst, n.constV = true, v
	return n
}

func enumOf(values ...string) *schemaNode {
	n := typed("string")
	n.enum = values
	return n
}

func oneOfNodes(alts ...*schemaNode) *schemaNode {
	n := node()
	n.oneOf = alts
	return n
}

func tupleOf(min, max int, items ...*schemaNode) *schemaNode {
	n := typed("array")
	n.tuple, n.minItems, n.maxItems = items, min, max
	return n
}

func object(props map[string]*schemaNode) *schemaNode {
	n := typed("object")
	n.noAdditionalProps = true
	for name, p := range props {
		n.props = append(n.props, schemaProp{name: name, node: p})
	}
	slices.SortFunc(n.props, func(a, b schemaProp) int { return strings.Compare(a.name, b.name) })
	return n
}

func patterned(src string) *schemaNode {
	n := typed("string")
	n.pattern, n.patternSrc = regexp.MustCompile(src), src
	return n
}

func bounded(n *schemaNode, min, max *float64) *schemaNode {
	n.minimum, n.maximum = min, max
	return n
}

func ptr(f float64) *float64 { return &f }

// publicMetrics are the metrics the Community Edition schema allows.
var publicMetrics = []string{
	"visitors", "visits", "pageviews", "views_per_visit", "bounce_rate", "visit_duration",
	"events", "percentage", "conversion_rate", "group_conversion_rate", "time_on_page", "scroll_depth",
}

// simpleDimensions are the schema's simple_filter_dimensions.
var simpleDimensions = []string{
	"event:name", "event:page", "event:hostname",
	"visit:source", "visit:channel", "visit:referrer",
	"visit:utm_medium", "visit:utm_source", "visit:utm_campaign", "visit:utm_content", "visit:utm_term",
	"visit:screen", "visit:device", "visit:browser", "visit:browser_version", "visit:os", "visit:os_version",
	"visit:country", "visit:region", "visit:city", "visit:country_name", "visit:region_name", "visit:city_name",
	"visit:entry_page", "visit:exit_page", "visit:entry_page_hostname", "visit:exit_page_hostname",
}

var timeDimensions = []string{"time", "time:month", "time:week", "time:day", "time:hour"}

var querySchema = buildQuerySchema()

func buildQuerySchema() *schemaNode {
	metricConsts := make([]*schemaNode, len(publicMetrics))
	for i, m := range publicMetrics {
		metricConsts[i] = constant(m)
	}
	metric := oneOfNodes(metricConsts...)
	simple := enumOf(simpleDimensions...)
	customProp := patterned(`^event:props:.+`)
	goal := constant("event:goal")
	timeDim := oneOfNodes(enumOf(timeDimensions...))
	dimension := oneOfNodes(simple, customProp, goal, timeDim)

	clauses := typed("array")
	clauses.items = typed("string", "integer")
	modifiers := object(map[string]*schemaNode{"case_sensitive": typed("boolean")})

	filterTree := node()
	filterWithPattern := tupleOf(3, 3, enumOf("matches", "matches_not"), oneOfNodes(simple, customProp), clauses)
	filterWithoutGoals := tupleOf(3, 4, enumOf("is_not", "contains_not"), oneOfNodes(simple, customProp), clauses, modifiers)
	filterWithIs := tupleOf(3, 4, constant("is"), oneOfNodes(goal, simple, customProp, constant("segment")), clauses, modifiers)
	filterWithContains := tupleOf(3, 4, constant("contains"), oneOfNodes(goal, simple, customProp), clauses, modifiers)
	filterEntry := oneOfNodes(filterWithoutGoals, filterWithIs, filterWithContains, filterWithPattern)
	children := typed("array")
	children.items, children.minItems = filterTree, 1
	filterAndOr := tupleOf(2, 2, enumOf("and", "or"), children)
	filterNot := tupleOf(2, 2, enumOf("not"), filterTree)
	filterHasDone := tupleOf(2, 2, enumOf("has_done", "has_not_done"), filterTree)
	filterTree.oneOf = []*schemaNode{filterEntry, filterAndOr, filterNot, filterHasDone}

	orderEntry := tupleOf(2, 2, oneOfNodes(metric, simple, customProp, timeDim), enumOf("asc", "desc"))

	shorthands := []string{"all", "day", "7d", "28d", "30d", "91d", "month", "6mo", "12mo", "year"}
	shorthand := node()
	for _, s := range shorthands {
		shorthand.anyOf = append(shorthand.anyOf, constant(s))
	}
	shorthand.anyOf = append(shorthand.anyOf, patterned(`^\d+d$`), patterned(`^\d+mo$`))
	dateTime := typed("string")
	dateTime.format = "date-time"
	date := typed("string")
	date.format = "date"
	dateRange := oneOfNodes(shorthand, tupleOf(2, 2, dateTime, dateTime), tupleOf(2, 2, date, date))

	metrics := typed("array")
	metrics.items, metrics.minItems, metrics.unique = metric, 1, true
	dimensions := typed("array")
	dimensions.items, dimensions.unique = dimension, true
	filters := typed("array")
	filters.items = filterTree
	orderBy := typed("array")
	orderBy.items = orderEntry

	root := object(map[string]*schemaNode{
		"site_id":    typed("string"),
		"metrics":    metrics,
		"date_range": dateRange,
		"dimensions": dimensions,
		"filters":    filters,
		"order_by":   orderBy,
		"include": object(map[string]*schemaNode{
			"time_labels":              typed("boolean"),
			"imports":                  typed("boolean"),
			"total_rows":               typed("boolean"),
			"trim_relative_date_range": typed("boolean"),
		}),
		"pagination": object(map[string]*schemaNode{
			"limit":  bounded(typed("integer"), ptr(1), ptr(10000)),
			"offset": bounded(typed("integer"), ptr(0), nil),
		}),
	})
	root.required = []string{"site_id", "metrics", "date_range"}
	return root
}

// schemaError formats the errors as stats/json_schema.ex does, with its
// rewording of unmatched oneOf alternatives.
func schemaError(errs []schemaErr) *QueryError {
	lines := make([]string, len(errs))
	for i, e := range errs {
		msg := e.msg
		if msg == noneMatched {
			switch {
			case strings.HasPrefix(e.path, "#/dimensions/"):
				msg = "Invalid dimension " + inspect(e.value)
			case strings.HasPrefix(e.path, "#/metrics/"):
				msg = "Invalid metric " + inspect(e.value)
			case strings.HasPrefix(e.path, "#/filters/"):
				msg = "Invalid filter " + inspect(e.value)
			case e.path == "#/date_range":
				msg = "Invalid date range " + inspect(e.value)
			case strings.HasPrefix(e.path, "#/order_by/"):
				msg = "Invalid value in order_by " + inspect(e.value)
			}
		}
		lines[i] = e.path + ": " + msg
	}
	return &QueryError{Message: strings.Join(lines, "\n")}
}
