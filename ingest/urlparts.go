package ingest

import (
	"bytes"
	"net/url"
	"strings"
	"unsafe"
)

// referrerHost returns the host of a referrer URL: no scheme, user info,
// port, path or query. It is a sub-slice of ref; non-URLs give nil.
//
// It runs on every redirect with capture on, so it scans by hand: the
// general searches (bytes.Index for "://", IndexAny for the end of the
// authority) cost about 90 ns on a typical referrer, the loops below a
// fraction of that.
func referrerHost(ref []byte) []byte {
	i := schemeEnd(ref)
	if i <= 0 {
		return nil
	}
	rest := ref[i+3:]
	end, at := len(rest), -1
	for j, c := range rest {
		if c == '/' || c == '?' || c == '#' {
			end = j
			break
		}
		if c == '@' {
			at = j
		}
	}
	rest = rest[at+1 : end]
	if len(rest) > 0 && rest[0] == '[' { // IPv6 literal
		if end := bytes.IndexByte(rest, ']'); end > 0 {
			return rest[1:end]
		}
		return nil
	}
	if colon := bytes.IndexByte(rest, ':'); colon >= 0 {
		rest = rest[:colon]
	}
	if len(rest) > 4 && rest[3] == '.' && rest[0]|0x20 == 'w' && rest[1]|0x20 == 'w' && rest[2]|0x20 == 'w' {
		rest = rest[4:]
	}
	for _, c := range rest {
		if c <= ' ' || c == '"' || c == '<' || c == '>' || c == '\\' || c == 0x7f {
			return nil
		}
	}
	return rest
}

// schemeEnd is the index of the first "://" in ref, or -1.
func schemeEnd(ref []byte) int {
	for i := 0; i+2 < len(ref); i++ {
		if ref[i] == ':' && ref[i+1] == '/' && ref[i+2] == '/' {
			return i
		}
	}
	return -1
}

// normalizeDomain lowercases a site domain and drops "www." and spaces, as
// Plausible does, so "WWW.Example.com " and "example.com" are one site.
func normalizeDomain(d string) string {
	d = strings.ToLower(strings.TrimSpace(d))
	d = strings.TrimSuffix(d, ".")
	return strings.TrimPrefix(d, "www.")
}

// pageURL is what a site event keeps of the page URL.
type pageURL struct {
	host string // lowercased, without www.
	path string // decoded path (plus "#fragment" in hash mode), never the query
	utm  [5]string
}

// parsePageURL splits a tracker's page URL. It fails for anything that is
// not an absolute URL with a host, and for data: URLs.
func parsePageURL(raw string, hashMode bool) (pageURL, bool) {
	var pu pageURL
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || strings.EqualFold(u.Scheme, "data") {
		return pu, false
	}
	pu.host = normalizeDomain(u.Hostname())
	if u.Opaque != "" {
		return pu, false
	}
	pu.path = u.Path
	if pu.path == "" {
		pu.path = "/"
	}
	if hashMode && u.Fragment != "" {
		pu.path += "#" + u.Fragment
	}
	if u.RawQuery != "" {
		q := u.Query()
		for i, name := range utmNames {
			v := q.Get(name)
			pu.utm[i] = v[:min(len(v), MaxUTMLen)]
		}
	}
	if len(pu.path) > MaxPathLen {
		return pu, false
	}
	return pu, true
}

// parsePageURLFast is parsePageURL without allocating, for the URLs
// trackers send: printable ASCII without spaces, and an authority that is
// a plain host name with an optional port. Inside that shape it answers
// exactly what parsePageURL (net/url) answers; handled is false for
// anything else, which the caller hands to parsePageURL. The strings are
// views of raw or of scratch.
func parsePageURLFast(raw string, hashMode bool, scratch *[]byte) (pu pageURL, ok, handled bool) {
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c <= ' ' || c >= 0x7f {
			return pu, false, false
		}
	}
	u, frag, hasFrag := strings.Cut(raw, "#")
	scheme, rest, ok := cutScheme(u)
	if !ok || scheme == "" || strings.EqualFold(scheme, "data") {
		return pu, false, true
	}
	if strings.HasSuffix(rest, "?") && strings.Count(rest, "?") == 1 {
		rest = rest[:len(rest)-1]
	}
	rest, query, _ := strings.Cut(rest, "?")
	if rest != "" && !strings.HasPrefix(rest, "/") {
		return pu, false, true // opaque ("scheme:" alone is an empty path)
	}
	if strings.HasPrefix(rest, "//") {
		authority := rest[2:]
		rest = ""
		if i := strings.IndexByte(authority, '/'); i >= 0 {
			authority, rest = authority[:i], authority[i:]
		}
		host, plain := plainHost(authority)
		if !plain {
			return pu, false, false
		}
		pu.host = normalizeASCIIDomain(host, scratch)
	}
	start := len(*scratch)
	if !unescapeInto(scratch, rest, false) {
		return pu, false, true
	}
	if len(*scratch) == start {
		*scratch = append(*scratch, '/')
	}
	if hasFrag {
		mark := len(*scratch)
		*scratch = append(*scratch, '#')
		if !unescapeInto(scratch, frag, false) {
			return pu, false, true
		}
		if !hashMode || len(*scratch) == mark+1 {
			*scratch = (*scratch)[:mark] // parsed (and checked), not kept
		}
	}
	if len(*scratch)-start > MaxPathLen {
		return pu, false, true
	}
	pu.path = viewBytes((*scratch)[start:])
	if query != "" {
		queryUTM(query, &pu.utm, scratch)
	}
	return pu, true, true
}

// cutScheme splits "scheme:rest" as net/url does; ok is false for a URL
// starting with ':'.
func cutScheme(u string) (scheme, rest string, ok bool) {
	for i := 0; i < len(u); i++ {
		c := u[i]
		switch {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.':
			if i == 0 {
				return "", u, true
			}
		case c == ':':
			if i == 0 {
				return "", "", false
			}
			return u[:i], u[i+1:], true
		default:
			return "", u, true
		}
	}
	return "", u, true
}

// plainHost returns the host name of an authority made only of letters,
// digits, dots and dashes, with an optional ":digits" port.
func plainHost(authority string) (string, bool) {
	host := authority
	if i := strings.IndexByte(authority, ':'); i >= 0 {
		host = authority[:i]
		for j := i + 1; j < len(authority); j++ {
			if c := authority[j]; c < '0' || c > '9' {
				return "", false
			}
		}
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-') {
			return "", false
		}
	}
	return host, true
}

// normalizeASCIIDomain is normalizeDomain for ASCII input, lowercasing
// into scratch only when needed.
func normalizeASCIIDomain(d string, scratch *[]byte) string {
	d = strings.TrimSpace(d)
	for i := 0; i < len(d); i++ {
		if c := d[i]; 'A' <= c && c <= 'Z' {
			start := len(*scratch)
			*scratch = appendLowerASCII(*scratch, d)
			d = viewBytes((*scratch)[start:])
			break
		}
	}
	d = strings.TrimSuffix(d, ".")
	return strings.TrimPrefix(d, "www.")
}

// normalizeDomainView is normalizeDomain, without allocating for ASCII.
func normalizeDomainView(d string, scratch *[]byte) string {
	for i := 0; i < len(d); i++ {
		if d[i] >= 0x80 {
			return normalizeDomain(d)
		}
	}
	return normalizeASCIIDomain(d, scratch)
}

// lowerView is strings.ToLower, without allocating for ASCII.
func lowerView(s string, scratch *[]byte) string {
	upper := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return strings.ToLower(s)
		}
		upper = upper || 'A' <= c && c <= 'Z'
	}
	if !upper {
		return s
	}
	start := len(*scratch)
	*scratch = appendLowerASCII(*scratch, s)
	return viewBytes((*scratch)[start:])
}

// unescapeInto appends s with %XX escapes decoded (and '+' as a space in
// a query component), as net/url's unescape does for paths, fragments and
// query components; false for a malformed escape.
func unescapeInto(dst *[]byte, s string, query bool) bool {
	out := *dst
	for i := 0; i < len(s); i++ {
		if run := plainRun(s[i:], query); run > 0 {
			out = append(out, s[i:i+run]...) // bytes that stand for themselves, at once
			if i += run; i >= len(s) {
				break
			}
		}
		c := s[i]
		switch {
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				*dst = out
				return false
			}
			out = append(out, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
		case c == '+' && query:
			out = append(out, ' ')
		default:
			out = append(out, c)
		}
	}
	*dst = out
	return true
}

// plainRun is how many bytes at the start of s stand for themselves: up
// to the first '%' (or '+' in a query).
func plainRun(s string, query bool) int {
	n := strings.IndexByte(s, '%')
	if n < 0 {
		n = len(s)
	}
	if query {
		if p := strings.IndexByte(s[:n], '+'); p >= 0 {
			n = p
		}
	}
	return n
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// queryUTM finds the UTM values in a raw query as url.Values.Get would
// after url.ParseQuery: pairs with a ';' or a malformed escape are
// skipped, the first value of a name wins, each is cut to MaxUTMLen.
func queryUTM(query string, utm *[5]string, scratch *[]byte) {
	var found [len(utmNames)]bool
	for query != "" {
		var pair string
		pair, query, _ = strings.Cut(query, "&")
		if pair == "" || strings.IndexByte(pair, ';') >= 0 {
			continue
		}
		key, value, _ := strings.Cut(pair, "=")
		mark := len(*scratch)
		if !unescapeInto(scratch, key, true) {
			*scratch = (*scratch)[:mark]
			continue
		}
		name := viewBytes((*scratch)[mark:])
		i := utmIndex(name)
		*scratch = (*scratch)[:mark]
		if i < 0 || found[i] {
			// Still a pair of ParseQuery's, but not one we keep (a
			// malformed value would be skipped there too).
			continue
		}
		if !unescapeInto(scratch, value, true) {
			*scratch = (*scratch)[:mark]
			continue
		}
		v := (*scratch)[mark:]
		found[i] = true
		utm[i] = viewBytes(v[:min(len(v), MaxUTMLen)])
	}
}

// utmIndex is name's index in utmNames, or -1. Most query keys are not
// UTM names, and most fail at the prefix.
func utmIndex(name string) int {
	if len(name) < len("utm_term") || name[:4] != "utm_" {
		return -1
	}
	switch name[4:] {
	case "source":
		return 0
	case "medium":
		return 1
	case "campaign":
		return 2
	case "term":
		return 3
	case "content":
		return 4
	}
	return -1
}

// viewBytes returns b as a string without copying; b must not change
// while the string is in use.
func viewBytes(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// bytesView returns s as a byte slice without copying; it must only be
// read.
func bytesView(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
