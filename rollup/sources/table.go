package sources

import (
	_ "embed"
	"fmt"
	"strings"
	"sync"
)

// The embedded data. referers.txt is generated (internal/gen) from the
// referer-parser database; overrides.txt is Waymark's own and wins over it.
var (
	//go:embed data/referers.txt
	referersTxt string
	//go:embed data/overrides.txt
	overridesTxt string
)

// category is a source category, as in Google's GA4 default channel group
// ("SOURCE_CATEGORY_SEARCH" and so on) that Plausible's channels use, plus
// Plausible's own AI-assistant category.
type category uint8

const (
	catNone category = iota
	catSearch
	catSocial
	catEmail
	catVideo
	catShopping
	catAI
)

var categoryNames = map[string]category{
	"search": catSearch, "social": catSocial, "email": catEmail,
	"video": catVideo, "shopping": catShopping, "ai": catAI,
}

// mediumCategory maps a referer-parser medium letter (see internal/gen) to
// a category. Paid and unknown carry none: paid (ad networks) says how
// the click was bought, not where; unknown is "we know the name only".
var mediumCategory = map[byte]category{
	's': catSearch, 'o': catSocial, 'e': catEmail, 'c': catAI, 'p': catNone, 'u': catNone,
}

// mediumRank orders the media when one source name is listed under
// several (Google under search, unknown and paid; Yandex under search and
// email): the first in this order gives the name its category.
var mediumRank = map[byte]int{'s': 0, 'o': 1, 'e': 2, 'c': 3, 'p': 4, 'u': 5}

// maxKey bounds the keys of names and cats, so that a lookup lower-cases
// into a stack buffer; load checks every key against it.
const maxKey = 64

// maxHost is the longest host lower-cased on the stack (RFC 1035: 253).
const maxHost = 256

// table is the lookup state, built once from the embedded files.
type table struct {
	// hosts: lower-case host -> source name, for the host and its
	// subdomains (the longest listed suffix wins, as in referer-parser).
	hosts map[string]string
	// names: lower-case source name or alias -> the name Waymark shows.
	// A utm_source and a database name both go through it.
	names map[string]string
	// cats: lower-case source (a name, an alias or a host) -> category.
	cats map[string]category
	// paid: lower-case utm_source values that mark paid traffic whatever
	// the medium (alias keys ending in "ad" or "ads", and "adwords").
	paid map[string]bool
	// suffixes: every suffix of two or more labels of a listed host, so a
	// lookup can walk a host from its registrable end leftwards and stop
	// at the first suffix no listed host ends in (see fromHost).
	suffixes map[string]suffix
}

// suffix is an entry of table.suffixes: a listed host (listed, with its
// source name) or only the end of longer ones.
type suffix struct {
	name   string
	listed bool
}

var load = sync.OnceValue(func() *table {
	t, err := build(referersTxt, overridesTxt)
	if err != nil {
		panic("BUG: embedded source data does not load: " + err.Error())
	}
	return t
})

// build parses the two files; it is separate from load so tests can feed
// it other data.
func build(referers, overrides string) (*table, error) {
	t := &table{
		hosts: map[string]string{},
		names: map[string]string{},
		cats:  map[string]category{},
		paid:  map[string]bool{},
	}
	dbCat := map[string]byte{} // lower-case name -> best medium letter seen
	for n, line := range strings.Split(referers, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 3 || len(f[0]) != 1 {
			return nil, fmt.Errorf("referers.txt line %d: want medium TAB name TAB hosts", n+1)
		}
		medium, name := f[0][0], f[1]
		if _, ok := mediumCategory[medium]; !ok {
			return nil, fmt.Errorf("referers.txt line %d: unknown medium %q", n+1, medium)
		}
		lname := strings.ToLower(name)
		t.names[lname] = name
		if prev, ok := dbCat[lname]; !ok || mediumRank[medium] < mediumRank[prev] {
			dbCat[lname] = medium
		}
		for _, h := range strings.Fields(f[2]) {
			t.hosts[h] = name
			if c := mediumCategory[medium]; c != catNone {
				t.cats[h] = c
			}
		}
	}
	if len(t.hosts) == 0 {
		return nil, fmt.Errorf("referers.txt lists no hosts")
	}

	aliases, catOverrides, err := parseOverrides(overrides, t)
	if err != nil {
		return nil, err
	}
	for k, v := range aliases {
		t.names[k] = v
		t.names[strings.ToLower(v)] = v
		if k == "adwords" || strings.HasSuffix(k, "ad") || strings.HasSuffix(k, "ads") {
			t.paid[k] = true
		}
	}
	// Every name a host resolves to is shown in its canonical spelling
	// (the database's "Twitter" is shown as "X (Twitter)").
	for h, name := range t.hosts {
		t.hosts[h] = t.canonical(name)
	}
	for lname, medium := range dbCat {
		c := mediumCategory[medium]
		if c == catNone {
			continue
		}
		t.cats[lname] = c
		t.cats[strings.ToLower(t.canonical(lname))] = c
	}
	for k, c := range catOverrides {
		t.cats[k] = c
	}
	t.suffixes = map[string]suffix{}
	for h, name := range t.hosts {
		if err := checkHost(h); err != nil {
			return nil, err
		}
		t.suffixes[h] = suffix{name, true}
		for i := strings.IndexByte(h, '.'); ; {
			rest := h[i+1:]
			if !strings.Contains(rest, ".") {
				break // a bare TLD is never looked up
			}
			if _, ok := t.suffixes[rest]; !ok {
				t.suffixes[rest] = suffix{}
			}
			i += 1 + strings.IndexByte(rest, '.')
		}
	}
	for k := range t.names {
		if len(k) > maxKey {
			return nil, fmt.Errorf("source name %q is longer than %d bytes", k, maxKey)
		}
	}
	for k := range t.cats {
		if len(k) > maxHost {
			return nil, fmt.Errorf("category key %q is longer than %d bytes", k, maxHost)
		}
	}
	return t, nil
}

// checkHost accepts a listed host: lower case, two or more non-empty
// labels, no spaces (fromHost never looks up a bare TLD).
func checkHost(h string) error {
	if h != strings.ToLower(h) || strings.ContainsAny(h, " \t/:") || !strings.Contains(h, ".") ||
		strings.HasPrefix(h, ".") || strings.HasSuffix(h, ".") || strings.Contains(h, "..") || len(h) > maxHost {
		return fmt.Errorf("listed host %q is not a lower-case name of two or more labels", h)
	}
	return nil
}

// canonical returns the shown spelling of a database or override name.
func (t *table) canonical(name string) string {
	if v, ok := t.names[strings.ToLower(name)]; ok {
		return v
	}
	return name
}

// parseOverrides reads data/overrides.txt: sections [hosts] (host TAB
// name, added to t.hosts), [aliases] (lower-case tag TAB name) and
// [categories] (lower-case source TAB category).
func parseOverrides(text string, t *table) (map[string]string, map[string]category, error) {
	aliases := map[string]string{}
	cats := map[string]category{}
	section := ""
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, " \r")
		if line == "" || line[0] == '#' {
			continue
		}
		if line[0] == '[' {
			section = strings.Trim(line, "[]")
			continue
		}
		k, v, ok := strings.Cut(line, "\t")
		v = strings.TrimLeft(v, "\t")
		if !ok || k == "" || v == "" || k != strings.ToLower(k) {
			return nil, nil, fmt.Errorf("overrides.txt line %d: want lower-case key TAB value", n+1)
		}
		switch section {
		case "hosts":
			t.hosts[k] = v
			t.names[strings.ToLower(v)] = v
		case "aliases":
			aliases[k] = v
		case "categories":
			c, ok := categoryNames[v]
			if !ok {
				return nil, nil, fmt.Errorf("overrides.txt line %d: unknown category %q", n+1, v)
			}
			cats[k] = c
		default:
			return nil, nil, fmt.Errorf("overrides.txt line %d: outside a known [section]", n+1)
		}
	}
	return aliases, cats, nil
}

// name looks s up case-insensitively in t.names.
func (t *table) name(s string) (string, bool) {
	var buf [maxKey]byte
	if len(s) > maxKey {
		if isASCII(s) {
			return "", false
		}
		v, ok := t.names[strings.ToLower(s)]
		return v, ok
	}
	k, ascii := appendLower(buf[:0], s)
	if !ascii {
		v, ok := t.names[strings.ToLower(s)]
		return v, ok
	}
	v, ok := t.names[string(k)]
	return v, ok
}

// category looks a source up case-insensitively in t.cats.
func (t *table) category(source string) category {
	var buf [maxHost]byte
	if len(source) > maxHost {
		if isASCII(source) {
			return catNone
		}
		return t.cats[strings.ToLower(source)]
	}
	k, ascii := appendLower(buf[:0], source)
	if !ascii {
		return t.cats[strings.ToLower(source)]
	}
	return t.cats[string(k)]
}

// paidSource reports whether a utm_source marks paid traffic.
func (t *table) paidSource(utmSource string) bool {
	var buf [maxKey]byte
	if utmSource == "" || len(utmSource) > maxKey {
		return false
	}
	k, ascii := appendLower(buf[:0], utmSource)
	if !ascii {
		return t.paid[strings.ToLower(utmSource)]
	}
	return t.paid[string(k)]
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
