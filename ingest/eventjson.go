package ingest

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// maxFanOut bounds how many sites one comma-separated "d" may name.
const maxFanOut = 10

// wireEvent is the /api/event body as Plausible's trackers send it. Each
// field has a short and a long key; the short one wins when both are set.
type wireEvent struct {
	N           *string         `json:"n"`
	Name        *string         `json:"name"`
	U           *string         `json:"u"`
	URL         *string         `json:"url"`
	D           *string         `json:"d"`
	Domain      *string         `json:"domain"`
	R           *string         `json:"r"`
	Referrer    *string         `json:"referrer"`
	H           flexNum         `json:"h"`
	HashMode    flexNum         `json:"hashMode"`
	P           json.RawMessage `json:"p"`
	Props       json.RawMessage `json:"props"`
	M           json.RawMessage `json:"m"`
	Meta        json.RawMessage `json:"meta"`
	I           flexNum         `json:"i"`
	Interactive flexNum         `json:"interactive"`
	E           flexNum         `json:"e"`
	SD          flexNum         `json:"sd"`
	W           flexNum         `json:"w"`
	ScreenWidth flexNum         `json:"screen_width"`
	T           flexNum         `json:"t"` // Waymark's tracker: client clock, Unix ms
	V           json.RawMessage `json:"v"` // tracker version: accepted, not stored
}

// flexNum accepts a JSON number, a numeric string, a boolean (1 or 0) or
// null, as Plausible's many client libraries send all of these.
type flexNum struct {
	set bool
	v   float64
}

func (f *flexNum) UnmarshalJSON(b []byte) error {
	s := string(bytes.TrimSpace(b))
	switch {
	case s == "null":
		return nil
	case s == "true":
		*f = flexNum{true, 1}
		return nil
	case s == "false":
		*f = flexNum{true, 0}
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
	*f = flexNum{true, v}
	return nil
}

// siteEventInput is a validated /api/event body, before site lookup.
type siteEventInput struct {
	name        string
	kind        Kind
	domains     []string
	page        pageURL
	refHost     string
	props       []Prop
	flags       uint8
	engagedMS   uint64
	scrollDepth uint8
	screenWidth uint32
	clientTime  int64
}

// badRequest is a validation failure: the field and what is wrong with it.
type badRequest struct {
	field, problem string
}

func (b *badRequest) Error() string { return b.field + " " + b.problem }

func firstString(a, b *string) (string, bool) {
	if a != nil {
		return *a, true
	}
	if b != nil {
		return *b, true
	}
	return "", false
}

func firstNum(a, b flexNum) flexNum {
	if a.set {
		return a
	}
	return b
}

// parseEventJSON decodes and validates an /api/event body.
func parseEventJSON(body []byte) (siteEventInput, *badRequest) {
	var in siteEventInput
	var w wireEvent
	if err := json.Unmarshal(body, &w); err != nil {
		return in, &badRequest{"request", "body is not a JSON event object"}
	}
	name, ok := firstString(w.N, w.Name)
	name = strings.TrimSpace(name)
	switch {
	case !ok || name == "":
		return in, &badRequest{"name", "is required"}
	case len(name) > MaxNameLen:
		return in, &badRequest{"name", "is longer than 120 bytes"}
	}
	in.name = name
	switch name {
	case "pageview":
		in.kind = KindPageview
	case "engagement":
		in.kind = KindEngagement
	default:
		in.kind = KindCustom
	}

	rawURL, ok := firstString(w.U, w.URL)
	switch {
	case !ok || rawURL == "":
		return in, &badRequest{"url", "is required"}
	case len(rawURL) > MaxPathLen:
		return in, &badRequest{"url", "is longer than 2000 bytes"}
	}
	hashMode := firstNum(w.H, w.HashMode).v == 1
	page, ok := parsePageURL(rawURL, hashMode)
	if !ok {
		return in, &badRequest{"url", "is not an absolute http(s) URL"}
	}
	in.page = page

	domains, ok := firstString(w.D, w.Domain)
	if !ok || strings.TrimSpace(domains) == "" {
		if ok || page.host == "" {
			return in, &badRequest{"domain", "is required"}
		}
		domains = page.host
	}
	for d := range strings.SplitSeq(domains, ",") {
		if d = normalizeDomain(d); d != "" && !slices.Contains(in.domains, d) {
			in.domains = append(in.domains, d)
		}
	}
	switch {
	case len(in.domains) == 0:
		return in, &badRequest{"domain", "is required"}
	case len(in.domains) > maxFanOut:
		return in, &badRequest{"domain", "names more than 10 sites"}
	}

	if ref, _ := firstString(w.R, w.Referrer); ref != "" {
		if len(ref) > MaxPathLen {
			return in, &badRequest{"referrer", "is longer than 2000 bytes"}
		}
		host := strings.ToLower(string(referrerHost([]byte(ref))))
		if len(host) <= MaxHostLen && host != page.host {
			in.refHost = host // a referrer from the page's own host is internal navigation
		}
	}

	props, bad := parseProps(w)
	if bad != nil {
		return in, bad
	}
	in.props = props

	if i := firstNum(w.I, w.Interactive); i.set && i.v == 0 {
		in.flags |= FlagNonInteractive
	}
	if in.kind == KindEngagement {
		if !w.SD.set || !w.E.set {
			return in, &badRequest{"engagement", "needs sd (scroll depth) and e (engaged ms)"}
		}
		if w.E.v < 0 || w.E.v >= maxEngagedMS {
			return in, &badRequest{"e", "must be between 0 and 30 days in milliseconds"}
		}
		in.engagedMS = uint64(w.E.v)
	}
	if w.SD.set {
		in.scrollDepth = uint8(min(max(w.SD.v, 0), maxScrollDepth))
	}
	if sw := firstNum(w.W, w.ScreenWidth); sw.set && sw.v > 0 && sw.v < 1<<20 {
		in.screenWidth = uint32(sw.v)
	}
	if w.T.set && w.T.v > 0 && w.T.v < 1<<53 {
		in.clientTime = int64(w.T.v)
	}
	return in, nil
}

// parseProps reads custom properties from p, props, m or meta: an object,
// or a JSON string holding one. Like Plausible, null, empty, list and map
// values are skipped and numbers and booleans are kept as their text; any
// other shape means no props. Props are sorted by key so equal events
// encode equally.
func parseProps(w wireEvent) ([]Prop, *badRequest) {
	var raw json.RawMessage
	for _, r := range []json.RawMessage{w.P, w.Props, w.M, w.Meta} {
		if len(r) > 0 && string(r) != "null" {
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
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil, nil
	}
	props := make([]Prop, 0, min(len(m), MaxProps))
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
			val = string(v) // number or boolean
		}
		if k == "" || val == "" {
			continue
		}
		if len(k) > MaxPropKeyLen {
			return nil, &badRequest{"props", "has a key longer than 300 bytes"}
		}
		if len(val) > MaxPropValLen {
			return nil, &badRequest{"props", "has a value longer than 2000 bytes"}
		}
		props = append(props, Prop{Key: k, Value: val})
	}
	if len(props) > MaxProps {
		return nil, &badRequest{"props", "has more than 30 properties"}
	}
	slices.SortFunc(props, func(a, b Prop) int { return strings.Compare(a.Key, b.Key) })
	return props, nil
}
