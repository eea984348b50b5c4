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
