package ingest

import (
	"reflect"
	"regexp"
	"regexp/syntax"
	"strings"
	"sync/atomic"
	"unicode"
	"unsafe"

	"github.com/x-way/crawlerdetect"
)

// crawlerMatcher answers exactly what crawlerdetect.IsCrawler answers, but
// in a few microseconds instead of about 90. crawlerdetect removes a list
// of browser tokens (the exclusions) from the user agent with one regular
// expression, then matches what is left against one alternation of about
// 1,400 crawler patterns; Go's regexp runs both as an NFA over every
// byte, with every pattern alive at once.
//
// The same two steps, with the same patterns (read from the library, so
// an upgrade brings its new crawlers along), are done here with cheap
// prefilters in front of the regular expressions:
//
//   - exclusions: a match of the alternation can only start where one of
//     its alternatives' possible prefixes starts, so only those positions
//     run that alternative, anchored, in the alternation's priority order;
//     what the alternation would replace is replaced;
//   - crawlers: every pattern has a set of literals of which any match
//     contains at least one, so only patterns whose literal occurs in the
//     remainder run at all.
//
// Both prefilters are necessary conditions, never guesses, so the answer is
// the library's. Case-insensitive matching is done on ASCII-lowercased
// copies; the two non-ASCII runes that fold to ASCII letters (the Kelvin
// sign and the long s) would break that, so a user agent holding either
// goes to the library itself. So does everything when the library's
// internals are not what this expects (see newCrawlerMatcher); a test
// makes sure that is not the case for the version in go.mod.
type crawlerMatcher struct {
	exclusions []exclusionAlt
	// exclByByte lists, per lowercased first byte, the exclusions that can
	// start with it, in priority order.
	exclByByte [256][]int16

	crawlers []crawlerAlt
	lits     []string  // lowercased necessary literals, at least 2 bytes
	litAlts  [][]int32 // literal -> crawler patterns that need it
	// pairBits marks the first two bytes of some literal; litsByPair
	// lists the literals starting with those two bytes.
	pairBits   [1 << 16 / 64]uint64
	litsByPair map[uint16][]int32
	// byteAlts lists patterns with a one-byte necessary literal.
	byteAlts [256][]int32
	// always lists patterns without any necessary literal.
	always []int32
}

type exclusionAlt struct {
	re       *regexp.Regexp // (?i)^(?:alternative)
	prefixes []string       // lowercased; a match starts with one of them
}

type crawlerAlt struct {
	src string
	re  atomic.Pointer[regexp.Regexp] // compiled on first use
}

// crawlerScratch holds the buffers of one caller (the matcher itself is
// read-only and may be shared).
type crawlerScratch struct {
	lower, rest, restLower []byte
	cands                  []int32
	seen                   []uint64 // bit per crawler pattern
}

// defaultCrawlers is built once from the library's default lists; nil if
// the library does not look as expected.
var defaultCrawlers = newCrawlerMatcher(crawlerdetect.New())

// newCrawlerMatcher reads the pattern lists out of a crawlerdetect
// instance. It returns nil (use the library) if they cannot be read or
// contain something the prefilters do not model: flag groups, which would
// leak across alternatives of the joined expression, or exclusions that
// can match the empty string or hold assertions, which would differ when
// run anchored on a suffix.
func newCrawlerMatcher(cd *crawlerdetect.CrawlerDetect) *crawlerMatcher {
	crawlers, ok1 := stringsField(cd, "crawlers")
	exclusions, ok2 := stringsField(cd, "exclusions")
	if !ok1 || !ok2 || len(crawlers) == 0 {
		return nil
	}
	m := &crawlerMatcher{litsByPair: make(map[uint16][]int32)}
	for i, src := range exclusions {
		if strings.Contains(src, "(?") {
			return nil
		}
		re, err := syntax.Parse("(?i)"+src, syntax.Perl)
		if err != nil {
			return nil
		}
		re = re.Simplify()
		if nullable(re) || hasAssertion(re) {
			return nil
		}
		prefixes, ok := prefixSet(re)
		if !ok {
			return nil
		}
		anchored, err := regexp.Compile("(?i)^(?:" + src + ")")
		if err != nil {
			return nil
		}
		m.exclusions = append(m.exclusions, exclusionAlt{re: anchored, prefixes: prefixes})
		for _, p := range prefixes {
			b := p[0]
			if l := m.exclByByte[b]; len(l) == 0 || l[len(l)-1] != int16(i) {
				m.exclByByte[b] = append(l, int16(i))
			}
		}
	}
	litIndex := map[string]int32{}
	m.crawlers = make([]crawlerAlt, len(crawlers))
	for i, src := range crawlers {
		if strings.Contains(src, "(?") {
			return nil
		}
		m.crawlers[i].src = src
		re, err := syntax.Parse("(?i)"+src, syntax.Perl)
		if err != nil {
			return nil
		}
		lits, ok := necessaryLiterals(re.Simplify())
		if !ok {
			m.always = append(m.always, int32(i))
			continue
		}
		for _, lit := range lits {
			if len(lit) == 1 {
				m.byteAlts[lit[0]] = append(m.byteAlts[lit[0]], int32(i))
				continue
			}
			id, seen := litIndex[lit]
			if !seen {
				id = int32(len(m.lits))
				litIndex[lit] = id
				m.lits = append(m.lits, lit)
				m.litAlts = append(m.litAlts, nil)
				pair := uint16(lit[0])<<8 | uint16(lit[1])
				m.pairBits[pair/64] |= 1 << (pair % 64)
				m.litsByPair[pair] = append(m.litsByPair[pair], id)
			}
			m.litAlts[id] = append(m.litAlts[id], int32(i))
		}
	}
	return m
}

// stringsField reads an unexported []string field of the library's type.
func stringsField(cd *crawlerdetect.CrawlerDetect, name string) ([]string, bool) {
	v := reflect.ValueOf(cd).Elem().FieldByName(name)
	if !v.IsValid() || v.Kind() != reflect.Slice || v.Type().Elem().Kind() != reflect.String {
		return nil, false
	}
	out := make([]string, v.Len())
	for i := range out {
		out[i] = v.Index(i).String()
	}
	return out, true
}

// isCrawler reports what crawlerdetect.IsCrawler(ua) reports.
func (m *crawlerMatcher) isCrawler(ua string, s *crawlerScratch) bool {
	if m == nil || strings.Contains(ua, "\u212a") || strings.Contains(ua, "\u017f") {
		return crawlerdetect.IsCrawler(ua)
	}
	in := strings.TrimSpace(ua)
	s.lower = appendLowerASCII(s.lower[:0], in)
	rest := m.exclude(in, s)
	s.restLower = appendLowerASCII(s.restLower[:0], rest)
	return m.matchCrawler(rest, s)
}

// exclude removes what the library's exclusion expression would remove
// (ReplaceAllString with ""): the leftmost match, preferring earlier
// alternatives, then the next match after it, and so on.
func (m *crawlerMatcher) exclude(in string, s *crawlerScratch) string {
	s.rest = s.rest[:0]
	kept := 0 // in[kept:p] is not yet copied to rest
	changed := false
	for p := 0; p < len(in); {
		end := m.exclusionAt(in, p, s.lower)
		if end <= p {
			p++
			continue
		}
		s.rest = append(s.rest, in[kept:p]...)
		kept, p, changed = end, end, true
	}
	if !changed {
		return in
	}
	s.rest = append(s.rest, in[kept:]...)
	return unsafe.String(unsafe.SliceData(s.rest), len(s.rest)) // read before s.rest changes

}

// exclusionAt returns the end of the exclusion match starting at p, or -1.
func (m *crawlerMatcher) exclusionAt(in string, p int, lower []byte) int {
	for _, i := range m.exclByByte[lower[p]] {
		alt := &m.exclusions[i]
		for _, pre := range alt.prefixes {
			if len(lower)-p >= len(pre) && string(lower[p:p+len(pre)]) == pre {
				if loc := alt.re.FindStringIndex(in[p:]); loc != nil {
					return p + loc[1]
				}
				break
			}
		}
	}
	return -1
}

// matchCrawler reports whether any crawler pattern matches rest; only
// patterns whose necessary literal occurs in it are run.
func (m *crawlerMatcher) matchCrawler(rest string, s *crawlerScratch) bool {
	low := s.restLower
	s.cands = append(s.cands[:0], m.always...)
	for p, c := range low {
		s.cands = append(s.cands, m.byteAlts[c]...)
		if p+1 >= len(low) {
			break
		}
		pair := uint16(c)<<8 | uint16(low[p+1])
		if m.pairBits[pair/64]&(1<<(pair%64)) == 0 {
			continue
		}
		for _, id := range m.litsByPair[pair] {
			lit := m.lits[id]
			if len(low)-p >= len(lit) && string(low[p:p+len(lit)]) == lit {
				s.cands = append(s.cands, m.litAlts[id]...)
			}
		}
	}
	if len(s.cands) == 0 {
		return false
	}
	if n := (len(m.crawlers) + 63) / 64; len(s.seen) < n {
		s.seen = make([]uint64, n)
	}
	defer clear(s.seen)
	for _, i := range s.cands {
		if s.seen[i/64]&(1<<(i%64)) != 0 {
			continue
		}
		s.seen[i/64] |= 1 << (i % 64)
		if m.crawlers[i].regexp().MatchString(rest) {
			return true
		}
	}
	return false
}

func (a *crawlerAlt) regexp() *regexp.Regexp {
	if re := a.re.Load(); re != nil {
		return re
	}
	re := regexp.MustCompile("(?i)(?:" + a.src + ")") // parsed already at start
	a.re.Store(re)
	return re
}

func appendLowerASCII(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// maxLitSet bounds the literal and prefix sets kept per pattern.
const maxLitSet = 16

// necessaryLiterals returns lowercased strings of which every match of re
// contains at least one, or false when there is no such set.
func necessaryLiterals(re *syntax.Regexp) ([]string, bool) {
	switch re.Op {
	case syntax.OpLiteral:
		return []string{lowerRunes(re.Rune)}, true
	case syntax.OpCharClass:
		return classChars(re.Rune)
	case syntax.OpCapture, syntax.OpPlus:
		return necessaryLiterals(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return necessaryLiterals(re.Sub[0])
		}
	case syntax.OpAlternate:
		var all []string
		for _, sub := range re.Sub {
			l, ok := necessaryLiterals(sub)
			if !ok {
				return nil, false
			}
			all = append(all, l...)
		}
		if len(all) <= maxLitSet {
			return all, true
		}
	case syntax.OpConcat:
		var best []string
		for _, sub := range re.Sub {
			if l, ok := necessaryLiterals(sub); ok && betterLits(l, best) {
				best = l
			}
		}
		return best, best != nil
	}
	return nil, false
}

// betterLits prefers the set whose shortest literal is longest.
func betterLits(a, b []string) bool {
	if b == nil {
		return true
	}
	return minLen(a) > minLen(b) || (minLen(a) == minLen(b) && len(a) < len(b))
}

func minLen(l []string) int {
	m := len(l[0])
	for _, s := range l[1:] {
		m = min(m, len(s))
	}
	return m
}

// prefixSet returns lowercased strings one of which starts every match of
// re, or false when there is no such set.
func prefixSet(re *syntax.Regexp) ([]string, bool) {
	switch re.Op {
	case syntax.OpLiteral:
		return []string{lowerRunes(re.Rune)}, true
	case syntax.OpCharClass:
		return classChars(re.Rune)
	case syntax.OpCapture, syntax.OpPlus:
		return prefixSet(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return prefixSet(re.Sub[0])
		}
	case syntax.OpAlternate:
		var all []string
		for _, sub := range re.Sub {
			l, ok := prefixSet(sub)
			if !ok {
				return nil, false
			}
			all = append(all, l...)
		}
		return all, len(all) <= maxLitSet
	case syntax.OpConcat:
		// The first part that cannot be empty starts every match; the
		// optional parts before it may start it instead.
		var all []string
		for _, sub := range re.Sub {
			l, ok := prefixSet(sub)
			if !ok {
				return nil, false
			}
			all = append(all, l...)
			if !nullable(sub) {
				return all, len(all) <= maxLitSet
			}
		}
	case syntax.OpQuest, syntax.OpStar:
		return prefixSet(re.Sub[0]) // only ever asked inside a concat
	}
	return nil, false
}

// classChars turns a small character class into its lowercased ASCII
// characters; a class with non-ASCII members or many characters has none
// worth indexing.
func classChars(ranges []rune) ([]string, bool) {
	var out []string
	for i := 0; i+1 < len(ranges); i += 2 {
		for r := ranges[i]; r <= ranges[i+1]; r++ {
			if r >= 0x80 || len(out) >= maxLitSet {
				return nil, false
			}
			c := string(rune(unicode.ToLower(r)))
			if !containsString(out, c) {
				out = append(out, c)
			}
		}
	}
	return out, len(out) > 0
}

func containsString(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// lowerRunes lowercases ASCII letters only, as the input is lowercased.
func lowerRunes(rs []rune) string {
	var b strings.Builder
	for _, r := range rs {
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

func nullable(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpStar, syntax.OpQuest,
		syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return true
	case syntax.OpRepeat:
		return re.Min == 0 || nullable(re.Sub[0])
	case syntax.OpCapture, syntax.OpPlus:
		return nullable(re.Sub[0])
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if !nullable(sub) {
				return false
			}
		}
		return true
	case syntax.OpAlternate:
		for _, sub := range re.Sub {
			if nullable(sub) {
				return true
			}
		}
	}
	return false
}

func hasAssertion(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return true
	}
	for _, sub := range re.Sub {
		if hasAssertion(sub) {
			return true
		}
	}
	return false
}
