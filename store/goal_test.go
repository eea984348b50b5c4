package store

import (
	"errors"
	"strings"
	"testing"
)

// The expectations below are worked out by hand from Plausible's rules,
// not from this code: a pattern without "*" is compared for equality
// (Plausible.Stats.Goals.page_path_condition); one with "*" becomes
// "^" + escaped + "$" with "|" as alternation and "*"/"**" as ".*"
// (Filters.Utils.page_regex), searched by ClickHouse's match().
func TestGoalMatchPage(t *testing.T) {
	cases := []struct {
		pattern string
		yes     []string
		no      []string
	}{
		// Exact: no wildcard means byte-for-byte equality, case included.
		{"/pricing", []string{"/pricing"}, []string{"/pricing/", "/Pricing", "/pricing?x", "/pricing/x", "/", "pricing"}},
		// "*" is ".*" since page_regex stopped using [^/]*: it crosses "/".
		{"/blog/*", []string{"/blog/", "/blog/a", "/blog/a/b/c"}, []string{"/blog", "/blogs/a", "/x/blog/a"}},
		// "**" is the same ".*".
		{"/blog/**", []string{"/blog/", "/blog/a", "/blog/a/b"}, []string{"/blog", "/Blog/a"}},
		// A wildcard in the middle: ^/.*/pricing$ needs two slashes.
		{"/*/pricing", []string{"/en/pricing", "/a/b/pricing", "//pricing"}, []string{"/pricing", "/en/pricing/", "/en/pricingx"}},
		// A trailing "*" right after text also matches the bare prefix.
		{"/docs*", []string{"/docs", "/docs-old", "/docs/a/b"}, []string{"/doc", "/x/docs"}},
		// "/*" matches every path.
		{"/*", []string{"/", "/a", "/a/b"}, []string{"", "a"}},
		// Regexp metacharacters other than "*" and "|" stay literal.
		{"/a.b*", []string{"/a.b", "/a.bc"}, []string{"/axb", "/a-b"}},
		{"/(x)+*", []string{"/(x)+", "/(x)+y"}, []string{"/x", "/xx", "/(x)"}},
		{"/p?q=[1]*", []string{"/p?q=[1]", "/p?q=[1]2"}, []string{"/pq=1", "/p?q=1"}},
		{`/back\slash*`, []string{`/back\slash`, `/back\slashes`}, []string{"/backslash"}},
		// Without a wildcard "|" is just a character.
		{"/a|/b", []string{"/a|/b"}, []string{"/a", "/b"}},
		// With a wildcard it is alternation over the whole anchored
		// expression: ^/a|/b.*$ = "starts with /a" or "contains /b".
		{"/a|/b*", []string{"/a", "/abc", "/a/z", "/b", "/x/b", "/x/by"}, []string{"/c", "/x/a", "/B"}},
		// A newline: ClickHouse's "." matches it.
		{"/n/*", []string{"/n/a\nb"}, []string{"/n"}},
	}
	for _, tc := range cases {
		g := Goal{ID: "g", PagePath: tc.pattern, DisplayName: "Visit " + tc.pattern}
		m := g.Matcher()
		for _, p := range tc.yes {
			if !g.MatchPage(p) || !m.MatchPage(p) {
				t.Errorf("pattern %q: %q does not match; want a match (regexp %s)", tc.pattern, p, PagePatternRegexp(tc.pattern))
			}
		}
		for _, p := range tc.no {
			if g.MatchPage(p) || m.MatchPage(p) {
				t.Errorf("pattern %q: %q matches; want no match (regexp %s)", tc.pattern, p, PagePatternRegexp(tc.pattern))
			}
		}
		if g.MatchEvent("pageview") || m.MatchEvent(tc.pattern) || m.MatchEvent("") {
			t.Errorf("page goal %q matched an event name", tc.pattern)
		}
	}
}

func TestGoalMatchEvent(t *testing.T) {
	g := Goal{ID: "g", EventName: "Signup", DisplayName: "Signup"}
	m := g.Matcher()
	for name, want := range map[string]bool{
		"Signup": true, "signup": false, "Signup ": false, "Sign": false, "Signups": false, "": false, "*": false,
	} {
		if got := g.MatchEvent(name); got != want {
			t.Errorf("MatchEvent(%q) = %v; want %v", name, got, want)
		}
		if got := m.MatchEvent(name); got != want {
			t.Errorf("Matcher().MatchEvent(%q) = %v; want %v", name, got, want)
		}
	}
	// An event goal never matches a page, even one that looks like its name.
	if g.MatchPage("/Signup") || g.MatchPage("Signup") || m.MatchPage("/") {
		t.Error("event goal matched a page")
	}
	// A "*" in an event name is literal: event goals compare names exactly.
	star := Goal{ID: "s", EventName: "Click*", DisplayName: "Click*"}
	if star.MatchEvent("Click: Buy") || !star.MatchEvent("Click*") {
		t.Error("event names must match exactly, without wildcards")
	}
	var zero GoalMatcher
	if zero.MatchEvent("") || zero.MatchPage("") || zero.MatchPage("/") {
		t.Error("zero GoalMatcher matched")
	}
}

func TestNormalizeGoal(t *testing.T) {
	cases := []struct {
		in, want Goal
	}{
		{Goal{ID: "a", PagePath: "pricing"}, Goal{ID: "a", PagePath: "/pricing", DisplayName: "Visit /pricing"}},
		{Goal{ID: "a", PagePath: "  /blog/*  "}, Goal{ID: "a", PagePath: "/blog/*", DisplayName: "Visit /blog/*"}},
		{Goal{ID: "a", EventName: " Signup\t"}, Goal{ID: "a", EventName: "Signup", DisplayName: "Signup"}},
		{Goal{ID: "a", EventName: "Signup", DisplayName: "  New customers "}, Goal{ID: "a", EventName: "Signup", DisplayName: "New customers"}},
	}
	for _, tc := range cases {
		got := tc.in
		if err := NormalizeGoal(&got); err != nil || got != tc.want {
			t.Errorf("NormalizeGoal(%+v) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	long := strings.Repeat("x", MaxGoalEventNameLen)
	for name, g := range map[string]Goal{
		"neither":            {ID: "a"},
		"both":               {ID: "a", EventName: "x", PagePath: "/x"},
		"blank event":        {ID: "a", EventName: "   "},
		"reserved":           {ID: "a", EventName: "engagement"},
		"name too long":      {ID: "a", EventName: long + "y"},
		"path too long":      {ID: "a", PagePath: "/" + strings.Repeat("p", MaxGoalPagePathLen)},
		"bad utf-8":          {ID: "a", EventName: "\xff"},
		"no id":              {EventName: "x"},
		"id with a slash":    {ID: "a/b", EventName: "x"},
		"id too long":        {ID: strings.Repeat("i", MaxGoalIDLen+1), EventName: "x"},
		"display too long":   {ID: "a", EventName: "x", DisplayName: strings.Repeat("d", MaxGoalDisplayNameLen+1)},
		"display bad utf-8":  {ID: "a", EventName: "x", DisplayName: "\xc3"},
		"path, blank itself": {ID: "a", PagePath: " \n"},
	} {
		if err := NormalizeGoal(&g); !errors.Is(err, ErrInvalidSiteEdit) {
			t.Errorf("%s: NormalizeGoal = %+v, %v; want ErrInvalidSiteEdit", name, g, err)
		}
	}
	ok := Goal{ID: "a", EventName: long}
	if err := NormalizeGoal(&ok); err != nil {
		t.Errorf("a %d-byte event name: %v; want accepted", MaxGoalEventNameLen, err)
	}
	path := Goal{ID: "b", PagePath: "/" + strings.Repeat("p", MaxGoalPagePathLen-1)}
	if err := NormalizeGoal(&path); err != nil {
		t.Errorf("a %d-byte page path: %v; want accepted (its default display name included)", MaxGoalPagePathLen, err)
	}
	// CheckGoal refuses what NormalizeGoal would have changed, so a stored
	// goal has one form.
	for _, g := range []Goal{
		{ID: "a", PagePath: "pricing", DisplayName: "Visit pricing"},
		{ID: "a", EventName: " x", DisplayName: "x"},
		{ID: "a", EventName: "x"},
	} {
		if err := CheckGoal(&g); !errors.Is(err, ErrInvalidSiteEdit) {
			t.Errorf("CheckGoal(%+v) = %v; want ErrInvalidSiteEdit", g, err)
		}
	}
}
