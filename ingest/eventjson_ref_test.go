package ingest

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The reference /api/event decoder: encoding/json and net/url, the way
// the endpoint read bodies before the allocation-free reader, with the
// rules that changed on purpose (case-sensitive keys, last occurrence
// wins, finite numbers, nesting bound, no client time, the width dropped
// class only). FuzzEventJSON holds the real reader to it.

// parsedEvent is a decoded body in plain, comparable form.
type parsedEvent struct {
	name        string
	kind        Kind
	domains     []string
	host, path  string
	utm         [5]string
	refHost     string
	props       []Prop
	flags       uint8
	engagedMS   uint64
	scrollDepth uint8
}

func flatten(in *siteEventInput) parsedEvent {
	return parsedEvent{
		name: strings.Clone(in.name), kind: in.kind,
		domains: cloneStrings(in.domainList()),
		host:    strings.Clone(in.page.host), path: strings.Clone(in.page.path),
		utm:     [5]string(cloneStrings(in.page.utm[:])),
		refHost: strings.Clone(in.refHost),
		props:   cloneProps(in.props),
		flags:   in.flags, engagedMS: in.engagedMS, scrollDepth: in.scrollDepth,
	}
}

func cloneStrings(l []string) []string {
	out := make([]string, len(l))
	for i, s := range l {
		out[i] = strings.Clone(s)
	}
	return out
}

func cloneProps(l []Prop) []Prop {
	var out []Prop
	for _, p := range l {
		out = append(out, Prop{strings.Clone(p.Key), strings.Clone(p.Value)})
	}
	return out
}

func (a parsedEvent) equal(b parsedEvent) bool {
	return a.name == b.name && a.kind == b.kind && slices.Equal(a.domains, b.domains) &&
		a.host == b.host && a.path == b.path && a.utm == b.utm && a.refHost == b.refHost &&
		slices.Equal(a.props, b.props) && a.flags == b.flags && a.engagedMS == b.engagedMS &&
		a.scrollDepth == b.scrollDepth
}

// refNum is the old flexNum: a JSON number, a numeric string, a boolean or
// null.
type refNum struct {
	set bool
	v   float64
}

func (f *refNum) UnmarshalJSON(b []byte) error {
	s := string(bytes.TrimSpace(b))
	switch {
	case s == "null":
		return nil
	case s == "true":
		*f = refNum{true, 1}
		return nil
	case s == "false":
		*f = refNum{true, 0}
		return nil
	case strings.HasPrefix(s, `"`):
		var str string
		if err := json.Unmarshal(b, &str); err != nil {
			return err
		}
		s = strings.TrimSpace(str)
		if s == "true" || s == "false" {
			return f.UnmarshalJSON([]byte(s))
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return &json.UnsupportedValueError{Str: "not a number: " + s}
	}
	*f = refNum{true, v}
	return nil
}

// jsonDepth is the deepest nesting of arrays and objects in valid JSON.
func jsonDepth(b []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, c := range b {
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case inString && c == '"':
			inString = false
		case inString:
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}

func refValidJSON(b []byte) bool { return json.Valid(b) && jsonDepth(b) <= maxJSONDepth }

func refParseEventJSON(body []byte) (parsedEvent, *badRequest) {
	var out parsedEvent
	var top map[string]json.RawMessage
	if !refValidJSON(body) || json.Unmarshal(body, &top) != nil {
		return out, errNotJSON
	}
	typeErr := false
	str := func(key string) *string {
		var p *string
		if raw, ok := top[key]; ok && json.Unmarshal(raw, &p) != nil {
			typeErr = true
		}
		return p
	}
	num := func(key string) refNum {
		var f refNum
		if raw, ok := top[key]; ok && json.Unmarshal(raw, &f) != nil {
			typeErr = true
		}
		return f
	}
	n, nameL, u, urlL := str("n"), str("name"), str("u"), str("url")
	d, domainL, r, referrerL := str("d"), str("domain"), str("r"), str("referrer")
	nums := map[string]refNum{}
	for _, k := range numberKeys {
		nums[k] = num(k)
	}
	if typeErr {
		return out, errNotJSON
	}
	for _, k := range numberKeys {
		if f := nums[k]; f.set && (math.IsNaN(f.v) || math.IsInf(f.v, 0)) {
			return out, errNotFiniteByKey[k]
		}
	}
	first := func(a, b *string) (string, bool) {
		if a != nil {
			return *a, true
		}
		if b != nil {
			return *b, true
		}
		return "", false
	}
	firstN := func(a, b string) refNum {
		if nums[a].set {
			return nums[a]
		}
		return nums[b]
	}

	name, ok := first(n, nameL)
	name = strings.TrimSpace(name)
	switch {
	case !ok || name == "":
		return out, errNameMissing
	case len(name) > MaxNameLen:
		return out, errNameLong
	}
	out.name = name
	switch name {
	case "pageview":
		out.kind = KindPageview
	case "engagement":
		out.kind = KindEngagement
	default:
		out.kind = KindCustom
	}

	rawURL, ok := first(u, urlL)
	switch {
	case !ok || rawURL == "":
		return out, errURLMissing
	case len(rawURL) > MaxPathLen:
		return out, errURLLong
	}
	page, ok := parsePageURL(rawURL, firstN("h", "hashMode").v == 1)
	if !ok {
		return out, errURLBad
	}
	out.host, out.path, out.utm = page.host, page.path, page.utm

	domains, ok := first(d, domainL)
	if !ok || strings.TrimSpace(domains) == "" {
		if ok || page.host == "" {
			return out, errDomainMissing
		}
		domains = page.host
	}
	for dom := range strings.SplitSeq(domains, ",") {
		if dom = normalizeDomain(dom); dom != "" && !slices.Contains(out.domains, dom) {
			out.domains = append(out.domains, dom)
		}
	}
	switch {
	case len(out.domains) == 0:
		return out, errDomainMissing
	case len(out.domains) > maxFanOut:
		return out, errDomainMany
	}

	if ref, _ := first(r, referrerL); ref != "" {
		if len(ref) > MaxPathLen {
			return out, errReferrerLong
		}
		host := strings.ToLower(string(referrerHost([]byte(ref))))
		if len(host) <= MaxHostLen && host != page.host {
			out.refHost = host
		}
	}

	props, bad := refParseProps(top)
	if bad != nil {
		return out, bad
	}
	out.props = props

	if i := firstN("i", "interactive"); i.set && i.v == 0 {
		out.flags |= FlagNonInteractive
	}
	e, sd := nums["e"], nums["sd"]
	if out.kind == KindEngagement {
		if !sd.set || !e.set {
			return out, errEngagement
		}
		if e.v < 0 || e.v >= maxEngagedMS {
			return out, errEngagedRange
		}
		out.engagedMS = uint64(e.v)
	}
	if sd.set {
		out.scrollDepth = uint8(min(max(sd.v, 0), maxScrollDepth))
	}
	return out, nil
}

func refParseProps(top map[string]json.RawMessage) ([]Prop, *badRequest) {
	var raw json.RawMessage
	for _, k := range []string{"p", "props", "m", "meta"} {
		if r := top[k]; len(r) > 0 && string(r) != "null" {
			raw = r
			break
		}
	}
	if raw == nil {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, nil
		}
		raw = json.RawMessage(s)
		if !refValidJSON(raw) {
			return nil, nil
		}
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil, nil
	}
	var props []Prop
	for k, v := range m {
		var val string
		switch {
		case len(v) == 0 || string(v) == "null" || v[0] == '[' || v[0] == '{':
			continue
		case v[0] == '"':
			if json.Unmarshal(v, &val) != nil {
				continue
			}
		default:
			val = string(v)
		}
		if k == "" || val == "" {
			continue
		}
		if len(k) > MaxPropKeyLen {
			return nil, errPropKeyLong
		}
		if len(val) > MaxPropValLen {
			return nil, errPropValLong
		}
		props = append(props, Prop{Key: k, Value: val})
	}
	if len(props) > MaxProps {
		return nil, errPropsMany
	}
	slices.SortFunc(props, func(a, b Prop) int { return strings.Compare(a.Key, b.Key) })
	return props, nil
}
