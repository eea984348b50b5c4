package ingest

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// maxFanOut bounds how many sites one comma-separated "d" may name.
const maxFanOut = 10

// The /api/event body is Plausible's: every field has a short and a long
// key, and the short one wins when both are set.
//
//	n, name          event name (required)
//	u, url           page URL (required)
//	d, domain        site domain(s), comma separated (default: the URL's host)
//	r, referrer      referrer URL (only its host is kept)
//	h, hashMode      1: keep the URL fragment as part of the path
//	i, interactive   false: the event does not affect bounce rate
//	e, sd            engaged milliseconds and scroll depth (engagement)
//	w, screen_width  the window's width: checked to be a number, then dropped
//	                 (the device class comes from the user agent, as Plausible's)
//	p, props, m, meta custom properties: an object, or a JSON string of one
//
// Numbers may be JSON numbers, numeric strings, booleans (1 or 0) or null
// (absent), as Plausible's many client libraries send all of these; each
// must be finite. Keys are case-sensitive, the last occurrence of a key
// wins, and unknown keys (Waymark's own tracker sends "t" and "v") are
// skipped. The body is read without allocating (see jsonReader).

// siteEventInput is a validated /api/event body, before site lookup. Its
// strings are views of the request body or of the parser's scratch, valid
// until the parser is released.
type siteEventInput struct {
	name        string
	kind        Kind
	domains     [maxFanOut]string
	nDomains    int
	page        pageURL
	refHost     string
	props       []Prop
	flags       uint8
	engagedMS   uint64
	scrollDepth uint8
}

func (in *siteEventInput) domainList() []string { return in.domains[:in.nDomains] }

// badRequest is a validation failure: the field and what is wrong with it.
type badRequest struct {
	field, problem string
}

func (b *badRequest) Error() string { return b.field + " " + b.problem }

// Validation failures, allocated once.
var (
	errNotJSON        = &badRequest{"request", "body is not a JSON event object"}
	errNameMissing    = &badRequest{"name", "is required"}
	errNameLong       = &badRequest{"name", "is longer than 120 bytes"}
	errURLMissing     = &badRequest{"url", "is required"}
	errURLLong        = &badRequest{"url", "is longer than 2000 bytes"}
	errURLBad         = &badRequest{"url", "is not an absolute http(s) URL"}
	errDomainMissing  = &badRequest{"domain", "is required"}
	errDomainMany     = &badRequest{"domain", "names more than 10 sites"}
	errReferrerLong   = &badRequest{"referrer", "is longer than 2000 bytes"}
	errPropKeyLong    = &badRequest{"props", "has a key longer than 300 bytes"}
	errPropValLong    = &badRequest{"props", "has a value longer than 2000 bytes"}
	errPropsMany      = &badRequest{"props", "has more than 30 properties"}
	errEngagement     = &badRequest{"engagement", "needs sd (scroll depth) and e (engaged ms)"}
	errEngagedRange   = &badRequest{"e", "must be between 0 and 30 days in milliseconds"}
	errNotFiniteByKey = func() map[string]*badRequest {
		m := map[string]*badRequest{}
		for _, k := range numberKeys {
			m[k] = &badRequest{k, "must be a finite number"}
		}
		return m
	}()
)

// numberKeys are the numeric fields, in the order they are checked.
var numberKeys = [...]string{"h", "hashMode", "i", "interactive", "e", "sd", "w", "screen_width"}

// The fields of a body as read: the last occurrence of each key.
type (
	strField struct {
		set, bad bool // bad: a type other than string or null
		v        []byte
	}
	numField struct {
		set, bad bool // bad: not a number, numeric string, boolean or null
		v        float64
	}
	rawField struct {
		set bool
		v   []byte // the value's JSON text
	}
	eventFields struct {
		n, name, u, url, d, domain, r, referrer strField
		num                                     [len(numberKeys)]numField
		p, props, m, meta                       rawField
	}
)

// Indexes into eventFields.num, as in numberKeys.
const (
	numH = iota
	numHashMode
	numI
	numInteractive
	numE
	numSD
	numW
	numScreenWidth
)

// eventParser holds one request's parse state; parsers are pooled so a
// request allocates nothing.
type eventParser struct {
	f       eventFields
	in      siteEventInput
	scratch []byte
	members []propMember
	props   []Prop
}

type propMember struct {
	key, val []byte
	skip     bool // null, array or object: not a property
	order    int
}

var eventParsers = sync.Pool{New: func() any { return new(eventParser) }}

func getEventParser() *eventParser { return eventParsers.Get().(*eventParser) }

func (ep *eventParser) release() {
	ep.f = eventFields{}
	clear(ep.props)
	ep.in = siteEventInput{}
	clear(ep.members)
	eventParsers.Put(ep)
}

// parse decodes and validates an /api/event body. The result lives in ep.
func (ep *eventParser) parse(body []byte) (*siteEventInput, *badRequest) {
	ep.scratch = ep.scratch[:0]
	ep.f = eventFields{}
	ep.in = siteEventInput{}
	if !ep.readFields(body) {
		return nil, errNotJSON
	}
	f, in := &ep.f, &ep.in
	for i, n := range f.num {
		if n.set && (math.IsNaN(n.v) || math.IsInf(n.v, 0)) {
			return nil, errNotFiniteByKey[numberKeys[i]]
		}
	}

	name, ok := firstString(f.n, f.name)
	name = strings.TrimSpace(name)
	switch {
	case !ok || name == "":
		return nil, errNameMissing
	case len(name) > MaxNameLen:
		return nil, errNameLong
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

	rawURL, ok := firstString(f.u, f.url)
	switch {
	case !ok || rawURL == "":
		return nil, errURLMissing
	case len(rawURL) > MaxPathLen:
		return nil, errURLLong
	}
	hashMode := firstNum(f.num[numH], f.num[numHashMode]).v == 1
	page, ok, handled := parsePageURLFast(rawURL, hashMode, &ep.scratch)
	if !handled {
		page, ok = parsePageURL(rawURL, hashMode)
	}
	if !ok {
		return nil, errURLBad
	}
	in.page = page

	domains, ok := firstString(f.d, f.domain)
	if !ok || strings.TrimSpace(domains) == "" {
		if ok || page.host == "" {
			return nil, errDomainMissing
		}
		domains = page.host
	}
	for d := range strings.SplitSeq(domains, ",") {
		if d = normalizeDomainView(d, &ep.scratch); d == "" || slices.Contains(in.domainList(), d) {
			continue
		}
		if in.nDomains == maxFanOut {
			return nil, errDomainMany
		}
		in.domains[in.nDomains] = d
		in.nDomains++
	}
	if in.nDomains == 0 {
		return nil, errDomainMissing
	}

	if ref, _ := firstString(f.r, f.referrer); ref != "" {
		if len(ref) > MaxPathLen {
			return nil, errReferrerLong
		}
		host := lowerView(viewBytes(referrerHost(bytesView(ref))), &ep.scratch)
		if len(host) <= MaxHostLen && host != page.host {
			in.refHost = host // a referrer from the page's own host is internal navigation
		}
	}

	if bad := ep.readProps(); bad != nil {
		return nil, bad
	}
	in.props = ep.props

	if i := firstNum(f.num[numI], f.num[numInteractive]); i.set && i.v == 0 {
		in.flags |= FlagNonInteractive
	}
	e, sd := f.num[numE], f.num[numSD]
	if in.kind == KindEngagement {
		if !sd.set || !e.set {
			return nil, errEngagement
		}
		if e.v < 0 || e.v >= maxEngagedMS {
			return nil, errEngagedRange
		}
		in.engagedMS = uint64(e.v)
	}
	if sd.set {
		in.scrollDepth = uint8(min(max(sd.v, 0), maxScrollDepth))
	}
	return in, nil
}

func firstString(a, b strField) (string, bool) {
	if a.set {
		return viewBytes(a.v), true
	}
	if b.set {
		return viewBytes(b.v), true
	}
	return "", false
}

func firstNum(a, b numField) numField {
	if a.set {
		return a
	}
	return b
}

// readFields reads the body's top-level object into ep.f; false if the
// body is not JSON, not an object, or gives a known key the wrong type.
// A top-level null reads as an empty object, as encoding/json has it.
func (ep *eventParser) readFields(body []byte) bool {
	r := jsonReader{b: body, scratch: &ep.scratch}
	f := &ep.f
	switch r.peek() {
	case jsonNull:
		r.literal("null")
		return r.atEnd()
	case jsonObject:
	default:
		return false
	}
	for r.enterObject(); r.nextMember(); {
		switch string(r.key) {
		case "n":
			readStr(&r, &f.n)
		case "name":
			readStr(&r, &f.name)
		case "u":
			readStr(&r, &f.u)
		case "url":
			readStr(&r, &f.url)
		case "d":
			readStr(&r, &f.d)
		case "domain":
			readStr(&r, &f.domain)
		case "r":
			readStr(&r, &f.r)
		case "referrer":
			readStr(&r, &f.referrer)
		case "h":
			readNum(&r, &f.num[numH])
		case "hashMode":
			readNum(&r, &f.num[numHashMode])
		case "i":
			readNum(&r, &f.num[numI])
		case "interactive":
			readNum(&r, &f.num[numInteractive])
		case "e":
			readNum(&r, &f.num[numE])
		case "sd":
			readNum(&r, &f.num[numSD])
		case "w":
			readNum(&r, &f.num[numW])
		case "screen_width":
			readNum(&r, &f.num[numScreenWidth])
		case "p":
			readRaw(&r, &f.p)
		case "props":
			readRaw(&r, &f.props)
		case "m":
			readRaw(&r, &f.m)
		case "meta":
			readRaw(&r, &f.meta)
		default:
			r.skip()
		}
	}
	if !r.atEnd() {
		return false
	}
	for _, s := range [...]*strField{&f.n, &f.name, &f.u, &f.url, &f.d, &f.domain, &f.r, &f.referrer} {
		if s.bad {
			return false
		}
	}
	for i := range f.num {
		if f.num[i].bad {
			return false
		}
	}
	return true
}

func readStr(r *jsonReader, f *strField) {
	switch r.peek() {
	case jsonNull:
		r.literal("null")
		*f = strField{}
	case jsonString:
		*f = strField{set: true, v: r.str()}
	default:
		r.skip()
		*f = strField{bad: true}
	}
}

// smallInt is ParseFloat's answer for an optional '-' and 1 to 15
// digits, the numbers trackers send ("w":1280, "e":12000), without its
// general parse: every such integer is exact in a float64.
func smallInt(s string) (float64, bool) {
	digits := s
	if len(s) > 0 && s[0] == '-' {
		digits = s[1:]
	}
	if len(digits) == 0 || len(digits) > 15 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	v := float64(n)
	if len(digits) < len(s) {
		v = -v // -0 stays negative zero, as ParseFloat gives it
	}
	return v, true
}

func readNum(r *jsonReader, f *numField) {
	switch r.peek() {
	case jsonNull:
		r.literal("null")
		*f = numField{}
	case jsonBool:
		*f = numField{set: true, v: b2f(r.boolean())}
	case jsonNumber:
		*f = parseNum(viewBytes(r.number()))
	case jsonString:
		s := strings.TrimSpace(viewBytes(r.str()))
		switch s {
		case "true", "false":
			*f = numField{set: true, v: b2f(s == "true")}
		default:
			*f = parseNum(s)
		}
	default:
		r.skip()
		*f = numField{bad: true}
	}
}

func parseNum(s string) numField {
	if v, ok := smallInt(s); ok {
		return numField{set: true, v: v}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return numField{bad: true}
	}
	return numField{set: true, v: v}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func readRaw(r *jsonReader, f *rawField) {
	r.peek()
	start := r.pos
	r.skip()
	*f = rawField{set: true, v: r.b[start:r.pos]}
}

// readProps reads custom properties from p, props, m or meta (the first
// one set and not null): an object, or a JSON string holding one. Like
// Plausible, null, empty, list and map values are skipped and numbers and
// booleans are kept as their text; any other shape means no props. Props
// are sorted by key so equal events encode equally; of a repeated key the
// last wins.
func (ep *eventParser) readProps() *badRequest {
	ep.props = ep.props[:0]
	var raw []byte
	for _, f := range [...]*rawField{&ep.f.p, &ep.f.props, &ep.f.m, &ep.f.meta} {
		if f.set && string(f.v) != "null" {
			raw = f.v
			break
		}
	}
	if raw == nil {
		return nil
	}
	if raw[0] == '"' {
		r := jsonReader{b: raw, scratch: &ep.scratch}
		raw = r.str()
	}
	if !ep.readMembers(raw) {
		return nil
	}
	// Keep the last of each key, in key order.
	slices.SortStableFunc(ep.members, func(a, b propMember) int { return bytes.Compare(a.key, b.key) })
	for i, m := range ep.members {
		if i+1 < len(ep.members) && bytes.Equal(ep.members[i+1].key, m.key) {
			continue
		}
		if m.skip || len(m.key) == 0 || len(m.val) == 0 {
			continue
		}
		if len(m.key) > MaxPropKeyLen {
			return errPropKeyLong
		}
		if len(m.val) > MaxPropValLen {
			return errPropValLong
		}
		ep.props = append(ep.props, Prop{Key: viewBytes(m.key), Value: viewBytes(m.val)})
	}
	if len(ep.props) > MaxProps {
		return errPropsMany
	}
	return nil
}

// readMembers reads a JSON object's members into ep.members; false if raw
// is not exactly one JSON object.
func (ep *eventParser) readMembers(raw []byte) bool {
	ep.members = ep.members[:0]
	r := jsonReader{b: raw, scratch: &ep.scratch}
	if r.peek() != jsonObject {
		return false
	}
	for r.enterObject(); r.nextMember(); {
		m := propMember{key: r.key, order: len(ep.members)}
		switch r.peek() {
		case jsonString:
			m.val = r.str()
		case jsonNumber:
			m.val = r.number()
		case jsonBool:
			start := r.pos
			r.boolean()
			m.val = r.b[start:r.pos]
		default:
			r.skip()
			m.skip = true
		}
		ep.members = append(ep.members, m)
	}
	return r.atEnd()
}
