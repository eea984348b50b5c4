package sources

import (
	"bytes"
	"strings"
)

// Labels Plausible shows, and accepts as filter values, for empty values.
const (
	// DirectNone stands for an empty source or referrer (and is accepted
	// for an empty utm_* value in a filter).
	DirectNone = "Direct / None"
	// NotSet stands for an empty utm_* value, device, browser, OS or
	// version.
	NotSet = "(not set)"
	// NoProp is the value of event:props:<name> for an event without that
	// property.
	NoProp = "(none)"
)

const androidApp = "android-app://"

// Source returns a visit's source as Plausible names it (its
// referrer_source, Plausible.Ingestion.Source.resolve):
//
//  1. A tagged source wins. The caller passes utm_source, or when that is
//     absent the "source" or "ref" query parameter, as Plausible does. A
//     value that names a known source, in any case, or a known shorthand
//     ("ig", "fb", "adwords") becomes that source's name ("google" and
//     "GOOGLE" are "Google", "ig" is "Instagram"); any other value is kept
//     as given.
//  2. Otherwise the referrer's host is looked up in the referrer database:
//     the host itself, then each parent domain in turn, so www.google.co.uk,
//     google.de and m.facebook.com find google.co.uk, google.de and
//     facebook.com. The longest listed suffix wins (gemini.google.com is
//     "Google Gemini", news.google.com "Google News", google.com "Google").
//     An Android app referrer is passed as "android-app://<package>".
//  3. An unknown host is its own source, without a leading "www."
//     (www.example.com is "example.com"), renamed when it is itself a known
//     name or shorthand.
//  4. No tag and no host: "" (direct), shown as DirectNone.
//
// referrerHost is the host alone, as ingest stores it; a port or a trailing
// dot is ignored. The caller drops internal referrers first (see
// IsExternal). The result is a database name or a substring of the input,
// never anything else.
func Source(referrerHost, utmSource string) string {
	t := load()
	if utmSource != "" {
		if name, ok := t.name(utmSource); ok {
			return name
		}
		return utmSource
	}
	if referrerHost == "" {
		return ""
	}
	return t.fromHost(referrerHost)
}

func (t *table) fromHost(ref string) string {
	prefix := 0
	if hasPrefixFold(ref, androidApp) {
		prefix = len(androidApp)
	}
	host := trimHost(ref[prefix:])
	if host == "" {
		return ""
	}
	full := ref[:prefix+len(host)] // the prefix and the host, still contiguous

	var buf [maxHost]byte
	lower, ascii := []byte(nil), false
	if len(full) <= maxHost {
		lower, ascii = appendLower(buf[:0], full)
	}
	if !ascii {
		// Non-ASCII or absurdly long: correct, but allocates.
		lower = []byte(strings.ToLower(full))
	}
	if name, ok := t.lookupHost(lower[prefix:]); ok {
		return name
	}

	// Unknown: the host itself, less "www.", renamed if it is a known name.
	bare := full
	if hasPrefixFold(host, "www.") {
		if prefix == 0 {
			bare, lower = host[4:], lower[4:]
		} else {
			bare = full[:prefix] + host[4:] // allocates; an app id never starts with www.
			lower = append(lower[:prefix], lower[prefix+4:]...)
		}
	}
	if len(lower) <= maxKey {
		if name, ok := t.names[string(lower)]; ok {
			return name
		}
	}
	return bare
}

// lookupHost finds the longest listed suffix of a lower-case host: it
// walks from the last two labels leftwards, one label a step, and stops
// at the first suffix that no listed host ends in. A host of n labels
// costs at most n-1 map lookups, an unknown one usually one.
func (t *table) lookupHost(host []byte) (string, bool) {
	start := bytes.LastIndexByte(host, '.')
	if start <= 0 {
		return "", false // a bare label: no listed host has fewer than two
	}
	name, found := "", false
	for {
		start = bytes.LastIndexByte(host[:start], '.') // -1: the whole host
		s, ok := t.suffixes[string(host[start+1:])]
		if !ok {
			break
		}
		if s.listed {
			name, found = s.name, true
		}
		if start < 0 {
			break
		}
	}
	return name, found
}

// trimHost drops a trailing dot and a :port from a host.
func trimHost(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && i+1 < len(h) && allDigits(h[i+1:]) {
		// host:port, or [v6]:port; a bare v6 address has colons but no ']'.
		if !strings.Contains(h[:i], ":") || strings.HasSuffix(h[:i], "]") {
			h = h[:i]
		}
	}
	return strings.TrimSuffix(h, ".")
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// IsExternal reports whether a referrer counts as one, as Plausible
// decides before it looks at it: it is not empty, not "localhost", and not
// the page's own host (compared without case, a leading "www." or a
// trailing dot). A referrer that is not external leaves the visit direct.
func IsExternal(referrerHost, pageHost string) bool {
	r, p := sanitizeHost(referrerHost), sanitizeHost(pageHost)
	if r == "" || equalFold(referrerHost, "localhost") {
		return false
	}
	return len(r) != len(p) || !equalFoldBoth(r, p)
}

func sanitizeHost(h string) string {
	h = strings.TrimSuffix(strings.TrimSpace(h), ".")
	if hasPrefixFold(h, "www.") {
		h = h[4:]
	}
	return h
}

func equalFoldBoth(a, b string) bool {
	for i := 0; i < len(a); i++ {
		if lowerByte(a[i]) != lowerByte(b[i]) {
			return false
		}
	}
	return true
}
