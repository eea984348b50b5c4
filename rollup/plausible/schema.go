package plausible

import (
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A small JSON Schema (draft 7) validator that reproduces ExJsonSchema's
// errors for Plausible's query schema (priv/json-schemas/query-api-schema.json,
// validated by stats/json_schema.ex): the same keywords, applied in the
// sorted key order an Elixir map iterates in, the same messages and paths.

type schemaNode struct {
	anyOf, oneOf      []*schemaNode
	hasConst          bool
	constV            string
	enum              []string
	format            string // "date" or "date-time"
	items             *schemaNode
	tuple             []*schemaNode // items as a list, with additionalItems false
	minItems          int           // -1 when unset
	maxItems          int
	minimum, maximum  *float64
	pattern           *regexp.Regexp
	patternSrc        string
	props             []schemaProp // sorted by name
	noAdditionalProps bool
	required          []string
	types             []string
	unique            bool
}

type schemaProp struct {
	name string
	node *schemaNode
}

type schemaErr struct {
	path  string
	msg   string
	value any
}

const noneMatched = "Expected exactly one of the schemata to match, but none of them did."

func (s *schemaNode) validate(v any, path string) []schemaErr {
	var errs []schemaErr
	add := func(msg string) { errs = append(errs, schemaErr{path: path, msg: msg, value: v}) }

	if len(s.anyOf) > 0 {
		ok := false
		for _, alt := range s.anyOf {
			if len(alt.validate(v, path)) == 0 {
				ok = true
				break
			}
		}
		if !ok {
			add("Expected any of the schemata to match but none did.")
		}
	}
	if s.hasConst && !equalString(v, s.constV) {
		add("Expected data to be " + inspect(s.constV) + ".")
	}
	if s.enum != nil {
		found := false
		for _, e := range s.enum {
			if equalString(v, e) {
				found = true
				break
			}
		}
		if !found {
			add("Value is not allowed in enum.")
		}
	}
	if str, ok := v.(string); ok && s.format != "" && !validFormat(s.format, str) {
		name := s.format
		if name == "date-time" {
			name = "ISO 8601 date-time"
		}
		add("Expected to be a valid " + name + ".")
	}
	list, isList := v.([]any)
	if isList && s.items != nil {
		for i, e := range list {
			errs = append(errs, s.items.validate(e, path+"/"+strconv.Itoa(i))...)
		}
	}
	if isList && s.tuple != nil {
		for i, e := range list {
			if i >= len(s.tuple) {
				add("Schema does not allow additional items.")
				break
			}
			errs = append(errs, s.tuple[i].validate(e, path+"/"+strconv.Itoa(i))...)
		}
	}
	if isList && s.maxItems >= 0 && len(list) > s.maxItems {
		add("Expected a maximum of " + strconv.Itoa(s.maxItems) + " items but got " + strconv.Itoa(len(list)) + ".")
	}
	if n, ok := number(v); ok && s.maximum != nil && n > *s.maximum {
		add("Expected the value to be <= " + strconv.FormatFloat(*s.maximum, 'f', -1, 64))
	}
	if isList && s.minItems >= 0 && len(list) < s.minItems {
		add("Expected a minimum of " + strconv.Itoa(s.minItems) + " items but got " + strconv.Itoa(len(list)) + ".")
	}
	if n, ok := number(v); ok && s.minimum != nil && n < *s.minimum {
		add("Expected the value to be >= " + strconv.FormatFloat(*s.minimum, 'f', -1, 64))
	}
	if len(s.oneOf) > 0 {
		valid := 0
		for _, alt := range s.oneOf {
			if len(alt.validate(v, path)) == 0 {
				valid++
			}
		}
		switch {
		case valid == 0:
			add(noneMatched)
		case valid > 1: // never for Plausible's schema: its alternatives are disjoint
			add("Expected exactly one of the schemata to match, but more than one did.")
		}
	}
	if str, ok := v.(string); ok && s.pattern != nil && !s.pattern.MatchString(str) {
		add("Does not match pattern " + inspect(s.patternSrc) + ".")
	}
	obj, isObj := v.(map[string]any)
	if isObj && s.props != nil {
		known := map[string]bool{}
		for _, p := range s.props {
			known[p.name] = true
			if e, ok := obj[p.name]; ok {
				errs = append(errs, p.node.validate(e, path+"/"+p.name)...)
			}
		}
		if s.noAdditionalProps {
			for _, k := range sortedKeys(obj) {
				if !known[k] {
					errs = append(errs, schemaErr{path: path + "/" + k, msg: "Schema does not allow additional properties.", value: obj[k]})
				}
			}
		}
	}
	if isObj && len(s.required) > 0 {
		var missing []string
		for _, r := range s.required {
			if _, ok := obj[r]; !ok {
				missing = append(missing, r)
			}
		}
		switch len(missing) {
		case 0:
		case 1:
			add("Required property " + missing[0] + " was not present.")
		default:
			add("Required properties " + strings.Join(missing, ", ") + " were not present.")
		}
	}
	if len(s.types) > 0 && !typeMatches(s.types, v) {
		exp := make([]string, len(s.types))
		for i, t := range s.types {
			exp[i] = strings.ToUpper(t[:1]) + t[1:]
		}
		act := dataType(v)
		add("Type mismatch. Expected " + strings.Join(exp, ", ") + " but got " + strings.ToUpper(act[:1]) + act[1:] + ".")
	}
	if isList && s.unique && !uniqueItems(list) {
		add("Expected items to be unique but they were not.")
	}
	return errs
}

func equalString(v any, s string) bool {
	str, ok := v.(string)
	return ok && str == s
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case jsonInt:
		if x.v == math.MaxInt64 || x.v == math.MinInt64 {
			f, _ := strconv.ParseFloat(x.text, 64)
			return f, true
		}
		return float64(x.v), true
	case float64:
		return x, true
	}
	return 0, false
}

func typeMatches(types []string, v any) bool {
	for _, t := range types {
		switch t {
		case "string":
			if _, ok := v.(string); ok {
				return true
			}
		case "boolean":
			if _, ok := v.(bool); ok {
				return true
			}
		case "array":
			if _, ok := v.([]any); ok {
				return true
			}
		case "object":
			if _, ok := v.(map[string]any); ok {
				return true
			}
		case "null":
			if v == nil {
				return true
			}
		case "number":
			if _, ok := number(v); ok {
				return true
			}
		case "integer":
			switch x := v.(type) {
			case jsonInt:
				return true
			case float64:
				if math.Round(x) == x {
					return true
				}
			}
		}
	}
	return false
}

func dataType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case jsonInt:
		return "integer"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case float64:
		return "number"
	}
	return "unknown"
}

func uniqueItems(list []any) bool {
	seen := make(map[string]bool, len(list))
	for _, e := range list {
		k := canonical(e)
		if seen[k] {
			return false
		}
		seen[k] = true
	}
	return true
}

// canonical is a type-tagged encoding under which two values are equal
// exactly when Erlang terms are (1 and 1.0 differ).
func canonical(v any) string {
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case nil:
			b.WriteString("n")
		case bool:
			b.WriteString("b" + strconv.FormatBool(x))
		case string:
			b.WriteString("s" + strconv.Quote(x))
		case jsonInt:
			b.WriteString("i" + x.text)
		case float64:
			b.WriteString("f" + strconv.FormatFloat(x, 'g', -1, 64))
		case []any:
			b.WriteString("[")
			for _, e := range x {
				walk(e)
				b.WriteString(",")
			}
			b.WriteString("]")
		case map[string]any:
			b.WriteString("{")
			for _, k := range sortedKeys(x) {
				b.WriteString(strconv.Quote(k) + ":")
				walk(x[k])
				b.WriteString(",")
			}
			b.WriteString("}")
		}
	}
	walk(v)
	return b.String()
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// validFormat checks ExJsonSchema's formats: "date" with Date.from_iso8601,
// "date-time" with NaiveDateTime.from_iso8601 on the upcased string.
func validFormat(format, s string) bool {
	switch format {
	case "date":
		_, _, _, ok := parseISODate(s)
		return ok
	case "date-time":
		_, ok := parseISODateTime(strings.ToUpper(s))
		return ok
	}
	return true
}

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
