package edge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/medama-io/go-useragent/agents"
	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/edge/problem"
	"github.com/waymark/waymark/store"
)

// Redirect rules in the API (issue 13):
//
//	"rules": [{"if": {"device": ["ios"]}, "url": "https://apps.apple.com/..."},
//	          {"if": {"country": ["DE", "AT"], "language": ["de"]}, "url": "..."},
//	          {"if": {"query": {"ref": "qr"}}, "url": "..."}]
//
// Several keys in one "if" must all match (AND); several values in one
// list are alternatives (OR). The first rule that matches wins; none
// matching, the link's own url is the destination. Each rule's url is
// validated, normalised and checked against the blocklist exactly like
// the link's url. rulematch.go evaluates them at the redirect.

// ruleIfFields are the condition names of a rule's "if".
var ruleIfFields = []string{"device", "os", "browser", "country", "language", "query", "after", "before"}

// ruleOSNames and ruleBrowserNames are the names analytics records (the
// user-agent parser's), which a rule must use; any case is accepted.
var (
	ruleOSNames = []string{
		string(agents.OSAndroid), string(agents.OSChromeOS), string(agents.OSIOS), string(agents.OSLinux),
		string(agents.OSFreeBSD), string(agents.OSOpenBSD), string(agents.OSMacOS), string(agents.OSWindows),
	}
	ruleBrowserNames = []string{
		string(agents.BrowserAndroid), string(agents.BrowserChrome), string(agents.BrowserEdge),
		string(agents.BrowserFirefox), string(agents.BrowserIE), string(agents.BrowserOpera),
		string(agents.BrowserOperaMini), string(agents.BrowserSafari), string(agents.BrowserVivaldi),
		string(agents.BrowserSilk), string(agents.BrowserSamsung), string(agents.BrowserFalkon),
		string(agents.BrowserNintendo), string(agents.BrowserYandex), string(agents.BrowserHuawei),
	}
)

// ruleError is a refused rule: the problem type, the JSON Pointer
// (RFC 6901) of the bad member and the message, which names the member
// as "rules[3].if.device".
type ruleError struct {
	prob    string
	pointer string
	detail  string
}

func (e *ruleError) Error() string { return e.detail }

func ruleErr(prob string, path []any, format string, args ...any) *ruleError {
	var dotted, ptr strings.Builder
	dotted.WriteString("rules")
	ptr.WriteString("/rules")
	for _, p := range path {
		switch v := p.(type) {
		case int:
			fmt.Fprintf(&dotted, "[%d]", v)
			fmt.Fprintf(&ptr, "/%d", v)
		case string:
			dotted.WriteString("." + v)
			ptr.WriteString("/" + strings.ReplaceAll(strings.ReplaceAll(v, "~", "~0"), "/", "~1"))
		}
	}
	return &ruleError{prob: prob, pointer: ptr.String(), detail: dotted.String() + ": " + fmt.Sprintf(format, args...)}
}

// writeRuleProblem answers a refused rule as RFC 9457 problem+json with a
// "pointer" extension member naming the bad member of the request.
func writeRuleProblem(ctx *fasthttp.RequestCtx, e *ruleError) {
	_, b := problem.Body(e.prob, e.detail, string(ctx.Path()))
	var m map[string]any
	if json.Unmarshal(b, &m) == nil {
		m["pointer"] = e.pointer
		b = marshalJSON(m)
	}
	problem.Write(ctx, e.prob, e.detail)
	ctx.SetBody(b)
}

// decodeRules reads the "rules" member: null or [] for none. Destinations
// are validated by the server (checkRuleURLs) afterwards.
func decodeRules(raw json.RawMessage) ([]store.Rule, *ruleError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, ruleErr(probInvalidRequest, nil, "must be an array of rules such as [{\"if\": {\"device\": [\"ios\"]}, \"url\": \"https://...\"}]")
	}
	if len(items) > store.MaxRules {
		return nil, ruleErr(probInvalidRequest, nil, "%d rules; a link has at most %d", len(items), store.MaxRules)
	}
	rules := make([]store.Rule, 0, len(items))
	for i, item := range items {
		r, err := decodeRule(i, item)
		if err != nil {
			return nil, err
		}
		rules = append(rules, r)
	}
	return rules, nil
}

func decodeRule(i int, raw json.RawMessage) (store.Rule, *ruleError) {
	var r store.Rule
	var o map[string]json.RawMessage
	if err := json.Unmarshal(raw, &o); err != nil || o == nil {
		return r, ruleErr(probInvalidRequest, []any{i}, `must be an object with "if" and "url"`)
	}
	for _, k := range sortedKeys(o) {
		if k != "if" && k != "url" {
			return r, ruleErr(probInvalidRequest, []any{i, k}, `unknown member; a rule has "if" and "url"`)
		}
	}
	if err := json.Unmarshal(o["url"], &r.URL); err != nil || r.URL == "" {
		return r, ruleErr(probInvalidRequest, []any{i, "url"}, "is required: the destination when the rule matches")
	}
	var cond map[string]json.RawMessage
	if err := json.Unmarshal(o["if"], &cond); err != nil || cond == nil {
		return r, ruleErr(probInvalidRequest, []any{i, "if"}, "is required: an object of conditions such as {\"country\": [\"DE\"]}")
	}
	if len(cond) == 0 {
		return r, ruleErr(probInvalidRequest, []any{i, "if"}, "has no condition; a rule needs at least one of %s", strings.Join(ruleIfFields, ", "))
	}
	for _, k := range sortedKeys(cond) {
		path := []any{i, "if", k}
		v := cond[k]
		var err *ruleError
		switch k {
		case "device":
			err = decodeDevices(path, v, &r.Devices)
		case "os":
			r.OS, err = decodeNames(path, v, ruleOSNames, "OS")
		case "browser":
			r.Browsers, err = decodeNames(path, v, ruleBrowserNames, "browser")
		case "country":
			r.Countries, err = decodeValues(path, v, "country", func(s string) (string, bool) {
				s = strings.ToUpper(s)
				ok := len(s) == 2 && s[0] >= 'A' && s[0] <= 'Z' && s[1] >= 'A' && s[1] <= 'Z'
				return s, ok
			})
		case "language":
			r.Languages, err = decodeValues(path, v, "language", func(s string) (string, bool) {
				s = strings.ToLower(s)
				if len(s) < 2 || len(s) > 8 {
					return s, false
				}
				for j := 0; j < len(s); j++ {
					if s[j] < 'a' || s[j] > 'z' {
						return s, false
					}
				}
				return s, true
			})
		case "query":
			r.Query, err = decodeQuery(path, v)
		case "after":
			r.After, err = decodeRuleTime(path, v)
		case "before":
			r.Before, err = decodeRuleTime(path, v)
		default:
			err = ruleErr(probInvalidRequest, path, "unknown condition; the conditions are %s", strings.Join(ruleIfFields, ", "))
		}
		if err != nil {
			return r, err
		}
	}
	if r.After != 0 && r.Before != 0 && r.After >= r.Before {
		return r, ruleErr(probInvalidRequest, []any{i, "if", "after"}, `must be earlier than "before"`)
	}
	return r, nil
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// stringList reads a non-empty array of strings (a lone string is
// accepted as a list of one).
func stringList(path []any, raw json.RawMessage, what string) ([]string, *ruleError) {
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		var one string
		if json.Unmarshal(raw, &one) != nil {
			return nil, ruleErr(probInvalidRequest, path, "must be an array of %s values", what)
		}
		list = []string{one}
	}
	if len(list) == 0 || len(list) > store.MaxRuleValues {
		return nil, ruleErr(probInvalidRequest, path, "must list 1 to %d values", store.MaxRuleValues)
	}
	return list, nil
}

func decodeDevices(path []any, raw json.RawMessage, bits *uint8) *ruleError {
	list, err := stringList(path, raw, "device")
	if err != nil {
		return err
	}
	for _, v := range list {
		known := false
		for b, name := range store.RuleDeviceNames {
			if strings.EqualFold(v, name) {
				*bits |= 1 << b
				known = true
			}
		}
		if !known {
			return ruleErr(probInvalidRequest, path, "unknown device %q; the devices are %s", v, strings.Join(store.RuleDeviceNames[:], ", "))
		}
	}
	return nil
}

// decodeNames reads OS or browser names, in any case, as analytics names
// them.
func decodeNames(path []any, raw json.RawMessage, known []string, what string) ([]string, *ruleError) {
	return decodeValues(path, raw, what, func(s string) (string, bool) {
		for _, k := range known {
			if strings.EqualFold(s, k) {
				return k, true
			}
		}
		return s, false
	}, known...)
}

// decodeValues reads a list and canonicalises each value; duplicates are
// dropped.
func decodeValues(path []any, raw json.RawMessage, what string, canon func(string) (string, bool), known ...string) ([]string, *ruleError) {
	list, err := stringList(path, raw, what)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(list))
	for _, v := range list {
		c, ok := canon(v)
		if !ok {
			if len(known) > 0 {
				return nil, ruleErr(probInvalidRequest, path, "unknown %s %q; the names are %s", what, v, strings.Join(known, ", "))
			}
			return nil, ruleErr(probInvalidRequest, path, "%q is not a valid %s", v, ruleValueHint(what))
		}
		dup := false
		for _, o := range out {
			dup = dup || o == c
		}
		if !dup {
			out = append(out, c)
		}
	}
	return out, nil
}

func ruleValueHint(what string) string {
	switch what {
	case "country":
		return "country (two letters, ISO 3166-1 alpha-2, such as \"DE\")"
	case "language":
		return "language (a primary language subtag of 2 to 8 letters, such as \"fr\")"
	}
	return what
}

// decodeQuery reads {"name": "value"} or {"name": ["v1", "v2"]}: every
// name must be present with one of its values.
func decodeQuery(path []any, raw json.RawMessage) ([]store.RuleQuery, *ruleError) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || len(m) == 0 {
		return nil, ruleErr(probInvalidRequest, path, "must be an object of query parameters such as {\"ref\": \"qr\"}")
	}
	if len(m) > store.MaxRuleQueryKeys {
		return nil, ruleErr(probInvalidRequest, path, "%d parameters; a rule tests at most %d", len(m), store.MaxRuleQueryKeys)
	}
	var out []store.RuleQuery
	for _, k := range sortedKeys(m) {
		p := append(append([]any(nil), path...), k)
		if k == "" || len(k) > store.MaxRuleQueryLen {
			return nil, ruleErr(probInvalidRequest, p, "a parameter name has 1 to %d bytes", store.MaxRuleQueryLen)
		}
		vals, err := stringList(p, m[k], "parameter")
		if err != nil {
			return nil, err
		}
		for _, v := range vals {
			if len(v) > store.MaxRuleQueryLen {
				return nil, ruleErr(probInvalidRequest, p, "a value has at most %d bytes", store.MaxRuleQueryLen)
			}
		}
		out = append(out, store.RuleQuery{Key: k, Values: vals})
	}
	return out, nil
}

func decodeRuleTime(path []any, raw json.RawMessage) (int64, *ruleError) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, ruleErr(probInvalidRequest, path, "must be an RFC 3339 time such as 2030-01-02T15:04:05Z")
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil || t.UnixMilli() <= 0 {
		return 0, ruleErr(probInvalidRequest, path, "must be an RFC 3339 time after 1970 such as 2030-01-02T15:04:05Z; got %q", s)
	}
	return t.UnixMilli(), nil
}

// checkRules validates and normalises every rule's destination like the
// link's own (parseDestination, self links, the blocklist), refuses rules
// on a permanent redirect, and encodes them.
func (s *Server) checkRules(rules []store.Rule, redirect int) (string, *ruleError) {
	if len(rules) == 0 {
		return "", nil
	}
	if redirect == 301 || redirect == 308 {
		return "", ruleErr(probInvalidRequest, nil, "a %d redirect cannot have rules: browsers cache it forever and never ask again; use 302 or 307", redirect)
	}
	for i := range rules {
		d, prob, detail := s.destinationProblem(rules[i].URL)
		if prob != "" {
			return "", ruleErr(prob, []any{i, "url"}, "%s", detail)
		}
		rules[i].URL = d.url
	}
	enc, err := store.EncodeRules(rules)
	if err != nil {
		return "", ruleErr(probInvalidRequest, nil, "%v", err)
	}
	return enc, nil
}

// ruleView is a rule as the API shows it.
type ruleView struct {
	If  ruleIfView `json:"if"`
	URL string     `json:"url"`
}

type ruleIfView struct {
	Device   []string       `json:"device,omitempty"`
	OS       []string       `json:"os,omitempty"`
	Browser  []string       `json:"browser,omitempty"`
	Country  []string       `json:"country,omitempty"`
	Language []string       `json:"language,omitempty"`
	Query    map[string]any `json:"query,omitempty"` // a string, or an array for several values
	After    string         `json:"after,omitempty"`
	Before   string         `json:"before,omitempty"`
}

// rulesView renders a link's stored rules; [] for none.
func rulesView(enc string) []ruleView {
	out := []ruleView{}
	rules, err := store.DecodeRules(enc)
	if err != nil {
		return out // DecodeLink has checked them
	}
	for _, r := range rules {
		v := ruleView{URL: r.URL, If: ruleIfView{OS: r.OS, Browser: r.Browsers, Country: r.Countries, Language: r.Languages}}
		for b, name := range store.RuleDeviceNames {
			if r.Devices&(1<<b) != 0 {
				v.If.Device = append(v.If.Device, name)
			}
		}
		if len(r.Query) > 0 {
			v.If.Query = make(map[string]any, len(r.Query))
			for _, q := range r.Query {
				if len(q.Values) == 1 {
					v.If.Query[q.Key] = q.Values[0]
				} else {
					v.If.Query[q.Key] = q.Values
				}
			}
		}
		if r.After != 0 {
			v.If.After = formatMillis(r.After)
		}
		if r.Before != 0 {
			v.If.Before = formatMillis(r.Before)
		}
		out = append(out, v)
	}
	return out
}
