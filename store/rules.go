package store

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// Redirect rules (issue 13): a link may send a visitor elsewhere than its
// URL by device, OS, browser, country, language, query parameters or a
// time window. The rules are evaluated in order at the edge, the first
// match wins and the link's URL is the fallback. Several conditions in one
// rule must all hold (AND); several values of one condition are
// alternatives (OR).
//
// A Link keeps its rules as one encoded string (Link.Rules), so Link stays
// comparable; EncodeRules and DecodeRules convert. The store checks the
// structure and every bound; the edge checks the meaning (destinations
// against the blocklist, known device, OS and browser names).

// Bounds on rules. A request body (16 KiB) cannot reach MaxRulesLen; the
// bound is there for bytes that come from elsewhere (a Raft entry, a
// record).
const (
	MaxRules         = 20
	MaxRuleValues    = 32  // values of one condition (countries, languages, ...)
	MaxRuleQueryKeys = 8   // query parameters one rule tests
	MaxRuleQueryLen  = 128 // one query key or value, in bytes
	MaxRuleNameLen   = 32  // an OS or browser name
	MaxRuleURLLen    = 2048
	MaxRulesLen      = 64 << 10 // the encoded rules of one link
)

// Device classes a rule can test (Rule.Devices). ios and android are the
// operating system; desktop, mobile and tablet the device class, as
// analytics records both.
const (
	RuleDeviceIOS uint8 = 1 << iota
	RuleDeviceAndroid
	RuleDeviceDesktop
	RuleDeviceMobile
	RuleDeviceTablet
	ruleDevicesKnown = RuleDeviceIOS | RuleDeviceAndroid | RuleDeviceDesktop | RuleDeviceMobile | RuleDeviceTablet
)

// RuleDeviceNames are the API names of the device bits, in bit order.
var RuleDeviceNames = [...]string{"ios", "android", "desktop", "mobile", "tablet"}

// Rule is one redirect rule. An empty condition (nil list, zero Devices,
// zero time) is not tested; at least one is set.
type Rule struct {
	URL       string
	Devices   uint8    // RuleDevice* bits; any of them matches
	OS        []string // OS names as analytics records them ("iOS", "Windows")
	Browsers  []string // browser names as analytics records them ("Chrome")
	Countries []string // ISO 3166-1 alpha-2, upper case
	Languages []string // primary language subtags, lower case ("fr")
	Query     []RuleQuery
	After     int64 // Unix ms: matches from then on; 0 unset
	Before    int64 // Unix ms: matches until just before then; 0 unset
}

// RuleQuery tests one query parameter: it matches when the visit's query
// has Key with one of Values (all of a rule's RuleQuery must match).
type RuleQuery struct {
	Key    string
	Values []string
}

// ErrInvalidRules is the sentinel of every refusal of rules.
var ErrInvalidRules = errors.New("invalid redirect rules")

const rulesVersion = 1

// Condition bits of an encoded rule, in field order.
const (
	ruleCondDevice = 1 << iota
	ruleCondOS
	ruleCondBrowser
	ruleCondCountry
	ruleCondLanguage
	ruleCondQuery
	ruleCondAfter
	ruleCondBefore
)

// Encoding:
//
//	version byte (1) | rule count uvarint (1..MaxRules)
//	per rule: condition bits byte (ruleCond*, not 0) | url string
//	  then, per bit in order: device byte | os, browser: count uvarint +
//	  strings | country: count + 2 bytes each | language: count + strings
//	  | query: count + (key string, value count, value strings) | after
//	  varint | before varint
//
// Strings are a uvarint length and the bytes. One rule set has one
// encoding: counts and lengths in range, no empty lists, no zero times.

// EncodeRules checks rules and returns their encoding; none is "".
func EncodeRules(rules []Rule) (string, error) {
	if len(rules) == 0 {
		return "", nil
	}
	if err := checkRules(rules); err != nil {
		return "", err
	}
	b := []byte{rulesVersion}
	b = appendUvarint(b, uint64(len(rules)))
	for i := range rules {
		b = appendRule(b, &rules[i])
	}
	if len(b) > MaxRulesLen {
		return "", fmt.Errorf("%w: %d bytes encoded, at most %d", ErrInvalidRules, len(b), MaxRulesLen)
	}
	return string(b), nil
}

func appendRule(b []byte, r *Rule) []byte {
	var conds byte
	if r.Devices != 0 {
		conds |= ruleCondDevice
	}
	if len(r.OS) > 0 {
		conds |= ruleCondOS
	}
	if len(r.Browsers) > 0 {
		conds |= ruleCondBrowser
	}
	if len(r.Countries) > 0 {
		conds |= ruleCondCountry
	}
	if len(r.Languages) > 0 {
		conds |= ruleCondLanguage
	}
	if len(r.Query) > 0 {
		conds |= ruleCondQuery
	}
	if r.After != 0 {
		conds |= ruleCondAfter
	}
	if r.Before != 0 {
		conds |= ruleCondBefore
	}
	b = append(b, conds)
	b = AppendString(b, r.URL)
	if r.Devices != 0 {
		b = append(b, r.Devices)
	}
	b = appendStrings(b, r.OS)
	b = appendStrings(b, r.Browsers)
	if len(r.Countries) > 0 {
		b = appendUvarint(b, uint64(len(r.Countries)))
		for _, c := range r.Countries {
			b = append(b, c...)
		}
	}
	b = appendStrings(b, r.Languages)
	if len(r.Query) > 0 {
		b = appendUvarint(b, uint64(len(r.Query)))
		for _, q := range r.Query {
			b = AppendString(b, q.Key)
			b = appendStrings(b, q.Values)
		}
	}
	if r.After != 0 {
		b = appendVarint(b, r.After)
	}
	if r.Before != 0 {
		b = appendVarint(b, r.Before)
	}
	return b
}

// appendStrings appends a count and the strings, nothing for none.
func appendStrings(b []byte, ss []string) []byte {
	if len(ss) == 0 {
		return b
	}
	b = appendUvarint(b, uint64(len(ss)))
	for _, s := range ss {
		b = AppendString(b, s)
	}
	return b
}

// DecodeRules decodes what EncodeRules returned, checking every field and
// bound; "" is no rules. Bad input returns an error wrapping ErrCorrupt
// (and ErrInvalidRules when the fields read but break a rule).
func DecodeRules(enc string) ([]Rule, error) {
	if enc == "" {
		return nil, nil
	}
	if len(enc) > MaxRulesLen {
		return nil, corruptRules("longer than %d bytes", MaxRulesLen)
	}
	r := NewFieldReader([]byte(enc))
	if r.Byte() != rulesVersion {
		return nil, corruptRules("unknown version")
	}
	n := r.Uvarint()
	if n == 0 || n > MaxRules {
		return nil, corruptRules("%d rules", n)
	}
	rules := make([]Rule, n)
	for i := range rules {
		if !decodeRule(&r, &rules[i]) {
			return nil, corruptRules("rule %d is malformed", i)
		}
	}
	if !r.Done() {
		return nil, corruptRules("malformed or trailing bytes")
	}
	if err := checkRules(rules); err != nil {
		return nil, fmt.Errorf("cannot decode redirect rules: %w: %w", ErrCorrupt, err)
	}
	return rules, nil
}

// CheckStoredRules reports why DecodeRules would refuse enc, or nil.
func CheckStoredRules(enc string) error {
	_, err := DecodeRules(enc)
	return err
}

// RulesSummary names an encoded rule set for the audit history, which
// keeps text: the count and a digest, so two different sets differ.
func RulesSummary(enc string) string {
	if enc == "" {
		return ""
	}
	n, _ := binary.Uvarint([]byte(enc[1:]))
	sum := sha256.Sum256([]byte(enc))
	return fmt.Sprintf("%d rules (sha256 %x)", n, sum[:6])
}

func corruptRules(format string, args ...any) error {
	return fmt.Errorf("cannot decode redirect rules: %w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// decodeRule reads one rule; the counts are bounded here, before anything
// is allocated for them, and the values by checkRules.
func decodeRule(r *FieldReader, x *Rule) bool {
	conds := r.Byte()
	if conds == 0 {
		return false
	}
	x.URL = readBounded(r, MaxRuleURLLen)
	if conds&ruleCondDevice != 0 {
		if x.Devices = r.Byte(); x.Devices == 0 {
			return false
		}
	}
	if conds&ruleCondOS != 0 {
		x.OS = readStrings(r, MaxRuleValues, MaxRuleNameLen)
	}
	if conds&ruleCondBrowser != 0 {
		x.Browsers = readStrings(r, MaxRuleValues, MaxRuleNameLen)
	}
	if conds&ruleCondCountry != 0 {
		n := readCount(r, MaxRuleValues)
		x.Countries = make([]string, n)
		for i := range x.Countries {
			x.Countries[i] = string(r.Fixed(2))
		}
	}
	if conds&ruleCondLanguage != 0 {
		x.Languages = readStrings(r, MaxRuleValues, 8)
	}
	if conds&ruleCondQuery != 0 {
		n := readCount(r, MaxRuleQueryKeys)
		x.Query = make([]RuleQuery, n)
		for i := range x.Query {
			x.Query[i].Key = readBounded(r, MaxRuleQueryLen)
			x.Query[i].Values = readStrings(r, MaxRuleValues, MaxRuleQueryLen)
		}
	}
	if conds&ruleCondAfter != 0 {
		if x.After = r.Varint(); x.After == 0 {
			return false
		}
	}
	if conds&ruleCondBefore != 0 {
		if x.Before = r.Varint(); x.Before == 0 {
			return false
		}
	}
	return !r.bad
}

// readCount reads a list length of 1 to limit (0 on a bad one, which
// fails r).
func readCount(r *FieldReader, limit int) int {
	n := r.Uvarint()
	if n == 0 || n > uint64(limit) {
		r.Fail()
		return 0
	}
	return int(n)
}

func readBounded(r *FieldReader, limit int) string {
	b := r.Bytes()
	if len(b) > limit {
		r.Fail()
		return ""
	}
	return string(b)
}

func readStrings(r *FieldReader, count, limit int) []string {
	n := readCount(r, count)
	if n == 0 {
		return nil
	}
	ss := make([]string, n)
	for i := range ss {
		ss[i] = readBounded(r, limit)
	}
	return ss
}

// checkRules holds the rules every encoded rule set meets. The messages
// name the rule as the API does ("rules[3].if.country: ...").
func checkRules(rules []Rule) error {
	if len(rules) > MaxRules {
		return fmt.Errorf("%w: rules: %d rules; at most %d", ErrInvalidRules, len(rules), MaxRules)
	}
	for i := range rules {
		if err := checkRule(&rules[i]); err != nil {
			return fmt.Errorf("%w: rules[%d].%s", ErrInvalidRules, i, err)
		}
	}
	return nil
}

func checkRule(r *Rule) error {
	switch {
	case r.URL == "" || len(r.URL) > MaxRuleURLLen:
		return fmt.Errorf("url: 1 to %d bytes", MaxRuleURLLen)
	case !strings.HasPrefix(r.URL, "http://") && !strings.HasPrefix(r.URL, "https://"):
		return errors.New("url: not an http or https URL")
	case !validUTF8NoControl(r.URL) || strings.IndexByte(r.URL, ' ') >= 0:
		return errors.New("url: spaces or control characters")
	}
	if r.Devices == 0 && len(r.OS) == 0 && len(r.Browsers) == 0 && len(r.Countries) == 0 &&
		len(r.Languages) == 0 && len(r.Query) == 0 && r.After == 0 && r.Before == 0 {
		return errors.New("if: no condition; a rule needs at least one")
	}
	if r.Devices&^ruleDevicesKnown != 0 {
		return errors.New("if.device: unknown device bits")
	}
	if err := checkNames("os", r.OS, MaxRuleNameLen, printableASCII); err != nil {
		return err
	}
	if err := checkNames("browser", r.Browsers, MaxRuleNameLen, printableASCII); err != nil {
		return err
	}
	if err := checkNames("country", r.Countries, 2, isCountryCode); err != nil {
		return err
	}
	if err := checkNames("language", r.Languages, 8, isLanguageTag); err != nil {
		return err
	}
	if len(r.Query) > MaxRuleQueryKeys {
		return fmt.Errorf("if.query: %d parameters; at most %d", len(r.Query), MaxRuleQueryKeys)
	}
	for i, q := range r.Query {
		if q.Key == "" || len(q.Key) > MaxRuleQueryLen || !validUTF8NoControl(q.Key) {
			return fmt.Errorf("if.query: parameter %d: a name of 1 to %d bytes without control characters", i, MaxRuleQueryLen)
		}
		for j := range i {
			if r.Query[j].Key == q.Key {
				return fmt.Errorf("if.query: parameter %q named twice", q.Key)
			}
		}
		if len(q.Values) == 0 || len(q.Values) > MaxRuleValues {
			return fmt.Errorf("if.query.%s: 1 to %d values", q.Key, MaxRuleValues)
		}
		for _, v := range q.Values {
			if len(v) > MaxRuleQueryLen || !validUTF8NoControl(v) {
				return fmt.Errorf("if.query.%s: values of at most %d bytes without control characters", q.Key, MaxRuleQueryLen)
			}
		}
	}
	if r.After < 0 || r.Before < 0 {
		return errors.New("if: times before 1970")
	}
	if r.After != 0 && r.Before != 0 && r.After >= r.Before {
		return errors.New("if: \"after\" must be earlier than \"before\"")
	}
	return nil
}

func checkNames(what string, vs []string, limit int, ok func(string) bool) error {
	if len(vs) > MaxRuleValues {
		return fmt.Errorf("if.%s: %d values; at most %d", what, len(vs), MaxRuleValues)
	}
	for _, v := range vs {
		if v == "" || len(v) > limit || !ok(v) {
			return fmt.Errorf("if.%s: %q is not a valid value", what, v)
		}
	}
	return nil
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// validUTF8NoControl: valid UTF-8 without ASCII control characters.
func validUTF8NoControl(s string) bool {
	for _, c := range s {
		if c == '\uFFFD' || c < ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

func isCountryCode(s string) bool {
	return len(s) == 2 && s[0] >= 'A' && s[0] <= 'Z' && s[1] >= 'A' && s[1] <= 'Z'
}

// isLanguageTag: a BCP 47 primary language subtag, lower case (2 to 8
// letters; ISO 639 codes are 2 or 3).
func isLanguageTag(s string) bool {
	if len(s) < 2 || len(s) > 8 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 'a' || s[i] > 'z' {
			return false
		}
	}
	return true
}
