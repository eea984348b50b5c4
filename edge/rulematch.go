package edge

import (
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/store"
)

// VisitClassifier tells redirect rules what analytics would record for a
// visit, so a rule on "mobile" or "DE" agrees with the stats. The node
// wires the ingest pipeline's (edge does not import ingest). Classify is
// asked only for links with rules, at most once per request, and only for
// what their conditions test: with ua, the device class ("desktop",
// "mobile", "tablet", "tv" or ""), OS and browser names; with geo, the
// country (ISO 3166-1 alpha-2, zero when unknown). It must be safe for
// concurrent use, must not block, and should not allocate.
type VisitClassifier interface {
	Classify(ctx *fasthttp.RequestCtx, ua, geo bool) (device, os, browser string, country [2]byte)
}

// ruleSet is a link's rules compiled into its cache entry once, so a
// redirect only compares.
type ruleSet struct {
	rules   []compiledRule
	needUA  bool // some rule tests device, OS or browser
	needGeo bool // some rule tests the country
	timed   bool // some rule has a time window
}

type compiledRule struct {
	location  []byte        // the destination, normalised at create
	blockSeen atomic.Uint32 // blocklist verdict for location, as entry.blockSeen
	devices   uint8         // store.RuleDevice* bits; 0 not tested
	os        []string
	browsers  []string
	countries [][2]byte
	languages []string
	query     []store.RuleQuery
	after     int64
	before    int64
}

// compileRules builds the rule set of a stored link; nil for none. The
// store has checked the encoding (DecodeLink), so an error here is a
// broken invariant and the link falls back to its own URL.
func compileRules(enc string) (*ruleSet, error) {
	if enc == "" {
		return nil, nil
	}
	rules, err := store.DecodeRules(enc)
	if err != nil {
		return nil, err
	}
	rs := &ruleSet{rules: make([]compiledRule, len(rules))}
	for i := range rules {
		r, c := &rules[i], &rs.rules[i]
		c.location = []byte(r.URL)
		c.devices, c.os, c.browsers, c.languages, c.query = r.Devices, r.OS, r.Browsers, r.Languages, r.Query
		for _, cc := range r.Countries {
			c.countries = append(c.countries, [2]byte{cc[0], cc[1]})
		}
		c.after, c.before = r.After, r.Before
		rs.needUA = rs.needUA || c.devices != 0 || len(c.os) > 0 || len(c.browsers) > 0
		rs.needGeo = rs.needGeo || len(c.countries) > 0
		rs.timed = rs.timed || c.after != 0 || c.before != 0
	}
	return rs, nil
}

// hdrAcceptLanguage is in fasthttp's canonical form, so a lookup need not
// normalise it first.
var hdrAcceptLanguage = []byte("Accept-Language")

// visit is what the rules know of one request, filled as they ask.
type visit struct {
	classified bool
	langDone   bool
	device     string
	os         string
	browser    string
	country    [2]byte
	lang       [8]byte
	langLen    int
}

// match returns the index of the first rule that matches the request, or
// -1. now is Unix ms (read by the caller when a rule is timed).
func (rs *ruleSet) match(ctx *fasthttp.RequestCtx, c VisitClassifier, now int64) int {
	var v visit
	for i := range rs.rules {
		r := &rs.rules[i]
		if r.after != 0 && now < r.after || r.before != 0 && now >= r.before {
			continue
		}
		if (r.devices != 0 || len(r.os) > 0 || len(r.browsers) > 0 || len(r.countries) > 0) && !v.classified {
			v.classified = true
			if c != nil {
				v.device, v.os, v.browser, v.country = c.Classify(ctx, rs.needUA, rs.needGeo)
			}
		}
		if r.devices != 0 && !deviceMatches(r.devices, v.device, v.os) {
			continue
		}
		if len(r.os) > 0 && !containsString(r.os, v.os) {
			continue
		}
		if len(r.browsers) > 0 && !containsString(r.browsers, v.browser) {
			continue
		}
		if len(r.countries) > 0 && !containsCountry(r.countries, v.country) {
			continue
		}
		if len(r.languages) > 0 {
			if !v.langDone {
				v.langDone = true
				v.langLen = primaryLanguage(ctx.Request.Header.PeekCanonical(hdrAcceptLanguage), &v.lang)
			}
			if !containsBytes(r.languages, v.lang[:v.langLen]) {
				continue
			}
		}
		if len(r.query) > 0 && !queryMatches(ctx.QueryArgs(), r.query) {
			continue
		}
		return i
	}
	return -1
}

// deviceMatches: ios and android are the OS, the others the device class.
func deviceMatches(bits uint8, device, os string) bool {
	return bits&store.RuleDeviceIOS != 0 && os == "iOS" ||
		bits&store.RuleDeviceAndroid != 0 && os == "Android" ||
		bits&store.RuleDeviceDesktop != 0 && device == "desktop" ||
		bits&store.RuleDeviceMobile != 0 && device == "mobile" ||
		bits&store.RuleDeviceTablet != 0 && device == "tablet"
}

func containsString(list []string, s string) bool {
	if s == "" {
		return false
	}
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func containsBytes(list []string, b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, x := range list {
		if x == string(b) { // compared without a copy
			return true
		}
	}
	return false
}

func containsCountry(list [][2]byte, c [2]byte) bool {
	if c == ([2]byte{}) {
		return false
	}
	for _, x := range list {
		if x == c {
			return true
		}
	}
	return false
}

// queryMatches: every parameter is present and its first value is one of
// the rule's (a rule's "" matches a parameter sent without a value).
func queryMatches(args *fasthttp.Args, qs []store.RuleQuery) bool {
	for i := range qs {
		q := &qs[i]
		if !args.Has(q.Key) {
			return false
		}
		got := args.Peek(q.Key)
		ok := false
		for _, v := range q.Values {
			if v == string(got) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// primaryLanguage writes the primary subtag (lower case) of the
// Accept-Language range the visitor prefers most (the highest q, the
// first of equals; "*" and q=0 never) into dst and returns its length, 0
// for none. "fr-CH, fr;q=0.9, en;q=0.8" is "fr".
func primaryLanguage(h []byte, dst *[8]byte) int {
	best, bestQ := 0, -1
	for len(h) > 0 {
		var part []byte
		if i := indexByte(h, ','); i >= 0 {
			part, h = h[:i], h[i+1:]
		} else {
			part, h = h, nil
		}
		tag, params := part, []byte(nil)
		if i := indexByte(part, ';'); i >= 0 {
			tag, params = part[:i], part[i+1:]
		}
		tag = trimSpaceBytes(tag)
		q := qValue(params)
		if q <= bestQ || q == 0 {
			continue
		}
		n := 0
		for n < len(tag) && n < 9 && isLetter(tag[n]) {
			n++
		}
		if n < 2 || n > 8 || (n < len(tag) && tag[n] != '-' && tag[n] != '_') {
			continue // "*", "i-klingon" style or malformed
		}
		for j := 0; j < n; j++ {
			dst[j] = tag[j] | 0x20
		}
		best, bestQ = n, q
	}
	return best
}

// qValue reads ";q=0.8" as 800 (1000 when absent, -1 when malformed).
func qValue(params []byte) int {
	for len(params) > 0 {
		var p []byte
		if i := indexByte(params, ';'); i >= 0 {
			p, params = params[:i], params[i+1:]
		} else {
			p, params = params, nil
		}
		p = trimSpaceBytes(p)
		if len(p) < 2 || (p[0] != 'q' && p[0] != 'Q') || p[1] != '=' {
			continue
		}
		v := p[2:]
		switch {
		case len(v) == 0:
			return -1
		case v[0] == '1':
			return 1000
		case v[0] != '0':
			return -1
		}
		q, scale := 0, 100
		for j := 2; j < len(v) && j < 5; j++ {
			if v[1] != '.' || v[j] < '0' || v[j] > '9' {
				return -1
			}
			q += int(v[j]-'0') * scale
			scale /= 10
		}
		return q
	}
	return 1000
}

func indexByte(b []byte, c byte) int {
	for i := range b {
		if b[i] == c {
			return i
		}
	}
	return -1
}

func trimSpaceBytes(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// ruleMetrics count what the rules decided.
type ruleMetrics struct {
	matched, fallback, blocked, invalid *metrics.Counter
}

func newRuleMetrics(set *metrics.Set) *ruleMetrics {
	return &ruleMetrics{
		matched:  set.GetOrCreateCounter(`waymark_rules_redirects_total{result="rule"}`),
		fallback: set.GetOrCreateCounter(`waymark_rules_redirects_total{result="fallback"}`),
		blocked:  set.GetOrCreateCounter(`waymark_rules_redirects_total{result="blocklisted"}`),
		invalid:  set.GetOrCreateCounter("waymark_rules_invalid_total"),
	}
}

// serveRules answers a redirect of a link with rules: the first matching
// rule's destination, else the link's, and the click records which.
func (s *Server) serveRules(ctx *fasthttp.RequestCtx, e *entry, code []byte, hit bool, now int64) {
	loc, rule, ok := s.pickRule(ctx, e, now)
	if !ok {
		return
	}
	writeRedirect(ctx, e, loc, now)
	if hit {
		s.m.redirectHit.Inc()
	} else {
		s.m.redirectMiss.Inc()
	}
	if ctx.IsHead() {
		return
	}
	s.captureRuleClick(ctx, code, rule)
}

// pickRule is where a visit of a link with rules goes: the first matching
// rule's destination and its number (1-based), or the link's own URL and
// 0. A matching rule whose destination is on the blocklist answers the
// blocked-destination page, and ok is false.
func (s *Server) pickRule(ctx *fasthttp.RequestCtx, e *entry, now int64) (loc []byte, rule uint8, ok bool) {
	rs := e.rules
	if rs.timed && now == 0 {
		now = s.now().UnixMilli()
	}
	loc = e.location
	i := rs.match(ctx, s.classifier, now)
	if i < 0 {
		s.ruleM.fallback.Inc()
		return loc, 0, true
	}
	r := &rs.rules[i]
	v := r.blockSeen.Load()
	blocked := v&1 == 1
	if gen := s.st.BlocklistGen(); v>>1 != gen {
		bl := s.st.Blocklist()
		blocked = locationBlocked(bl, r.location)
		v = bl.Gen() << 1
		if blocked {
			v |= 1
		}
		r.blockSeen.Store(v)
	}
	if blocked {
		s.ruleM.blocked.Inc()
		s.m.blocklisted.Inc()
		writePage(ctx, fasthttp.StatusGone, pageBlockedDest)
		return nil, 0, false
	}
	s.ruleM.matched.Inc()
	return r.location, uint8(i + 1), true
}

// captureRuleClick hands a click to the capture hook with the rule it
// followed (0: the link's own URL).
func (s *Server) captureRuleClick(ctx *fasthttp.RequestCtx, code []byte, rule uint8) {
	if s.onRuleRedirect != nil {
		s.onRuleRedirect(ctx, code, rule)
	} else if s.onRedirect != nil {
		s.onRedirect(ctx, code)
	}
}

// addRules compiles l's rules into e. The answer depends on who asks, so
// no cache may keep it: Cache-Control is no-store (and with an expiry,
// max-age=0).
func (s *Server) addRules(e *entry, l *store.Link) {
	rs, err := compileRules(l.Rules)
	if err != nil {
		s.ruleM.invalid.Inc()
		s.log.Error("BUG: stored redirect rules do not decode; the link redirects to its own URL", "code", l.Code, "err", err)
		return
	}
	e.rules = rs
	e.cacheControl, e.public, e.maxAge = valNoStore, false, 0
}
