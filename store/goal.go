package store

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Goal is a conversion a site counts: a custom event with a given name, or
// a pageview of a path that matches a pattern. Exactly one of EventName and
// PagePath is set. The semantics are Plausible's (lib/plausible/goal/
// schema.ex, lib/plausible/stats/goals.ex): an event goal is completed by
// an event whose name equals EventName exactly; a page goal by a pageview
// (never another kind of event) whose path MatchPage accepts.
type Goal struct {
	ID          string // short random id, unique within the site
	EventName   string
	PagePath    string // "/pricing", "/blog/*", "/docs/**"
	DisplayName string // unique within the site; "Visit <path>" or the event name by default
}

// Limits of a site's goals. MaxGoalEventNameLen is ingest's MaxNameLen and
// Plausible's @max_event_name_length: a longer name could never arrive.
const (
	MaxGoals              = 100
	MaxGoalIDLen          = 32
	MaxGoalEventNameLen   = 120
	MaxGoalPagePathLen    = 2000
	MaxGoalDisplayNameLen = len("Visit ") + MaxGoalPagePathLen
	// ReservedGoalEvent is the event name Plausible refuses as a goal: the
	// tracker sends it for time on page, not as a conversion.
	ReservedGoalEvent = "engagement"
)

// IsPage reports whether g is a page goal.
func (g *Goal) IsPage() bool { return g.PagePath != "" }

// Type is "page" or "event", as Plausible's goal_type.
func (g *Goal) Type() string {
	if g.IsPage() {
		return "page"
	}
	return "event"
}

// MatchEvent reports whether a custom event named name completes g.
// Matching is exact and case-sensitive; a page goal matches no event name.
func (g *Goal) MatchEvent(name string) bool {
	return g.EventName != "" && name == g.EventName
}

// MatchPage reports whether a pageview of path completes g. It compiles
// the pattern on every call; code that tests many events should use
// Matcher once per goal.
func (g *Goal) MatchPage(path string) bool { return g.Matcher().MatchPage(path) }

// GoalMatcher is a goal with its page pattern compiled. The zero value
// matches nothing.
type GoalMatcher struct {
	event string
	exact string         // page pattern without a wildcard: equality
	re    *regexp.Regexp // page pattern with a wildcard
}

// Matcher compiles g for repeated matching.
func (g *Goal) Matcher() GoalMatcher {
	switch {
	case g.EventName != "":
		return GoalMatcher{event: g.EventName}
	case !strings.Contains(g.PagePath, "*"):
		return GoalMatcher{exact: g.PagePath}
	}
	re, err := regexp.Compile(PagePatternRegexp(g.PagePath))
	if err != nil {
		// QuoteMeta output with ".*" and "|" put back is always valid RE2.
		panic(fmt.Sprintf("BUG: page pattern %q compiled to an invalid regexp: %v", g.PagePath, err))
	}
	return GoalMatcher{re: re}
}

// MatchEvent reports whether a custom event named name completes the goal.
func (m GoalMatcher) MatchEvent(name string) bool { return m.event != "" && name == m.event }

// MatchPage reports whether a pageview of path completes the goal.
func (m GoalMatcher) MatchPage(path string) bool {
	switch {
	case m.re != nil:
		return m.re.MatchString(path)
	case m.exact != "":
		return path == m.exact
	}
	return false
}

// PagePatternRegexp is the regular expression Plausible builds for a page
// pattern that holds a "*" (Plausible.Stats.Filters.Utils.page_regex):
// every character is escaped, then "|" is put back as alternation and both
// "**" and "*" become ".*" (so "/blog/*" also matches "/blog/a/b"), and
// the whole is wrapped in "^...$". ClickHouse's match() searches rather
// than anchors and lets "." match a newline, so an alternation such as
// "/a|/b*" means "starts with /a, or contains /b": Go's RE2 with (?s) and
// MatchString behaves the same. A pattern without "*" is compared for
// equality instead, "|" included.
func PagePatternRegexp(pattern string) string {
	q := regexp.QuoteMeta(pattern)
	q = strings.ReplaceAll(q, `\|`, "|")
	q = strings.ReplaceAll(q, `\*\*`, ".*")
	q = strings.ReplaceAll(q, `\*`, ".*")
	return "(?s)^" + q + "$"
}

// ErrInvalidSiteEdit means a site edit or goal breaks the record's rules
// (lengths, exactly one of event name and page path, untrimmed text). The
// API checks first, so through it this means a client bypassed the checks.
var ErrInvalidSiteEdit = errors.New("invalid site edit")

// ErrGoalExists means the site already has a goal with the same id, event
// name, page path or display name.
var ErrGoalExists = errors.New("goal already exists")

// ErrTooManyGoals means the site already has MaxGoals goals.
var ErrTooManyGoals = errors.New("site has the most goals allowed")

// NormalizeGoal trims the text fields, puts a leading "/" on a page path
// and fills in the default display name, as Plausible's changeset does,
// then checks the result.
func NormalizeGoal(g *Goal) error {
	g.EventName = strings.TrimSpace(g.EventName)
	g.PagePath = strings.TrimSpace(g.PagePath)
	if g.PagePath != "" && !strings.HasPrefix(g.PagePath, "/") {
		g.PagePath = "/" + g.PagePath
	}
	g.DisplayName = strings.TrimSpace(g.DisplayName)
	if g.DisplayName == "" {
		if g.PagePath != "" {
			g.DisplayName = "Visit " + g.PagePath
		} else {
			g.DisplayName = g.EventName
		}
	}
	return CheckGoal(g)
}

// CheckGoal reports why g cannot be stored, wrapping ErrInvalidSiteEdit.
// The record decoder, the raft command decoder and the writers all use it,
// so nothing is written that a replica could not read back.
func CheckGoal(g *Goal) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: goal %s", ErrInvalidSiteEdit, fmt.Sprintf(format, args...))
	}
	switch {
	case !ValidGoalID(g.ID):
		return bad("id %q must be 1 to %d letters, digits, '-' or '_'", g.ID, MaxGoalIDLen)
	case (g.EventName == "") == (g.PagePath == ""):
		return bad("needs exactly one of an event name and a page path")
	case !cleanText(g.EventName) || !cleanText(g.PagePath) || !cleanText(g.DisplayName):
		return bad("text must be valid UTF-8 without surrounding white space")
	case len(g.EventName) > MaxGoalEventNameLen:
		return bad("event name is %d bytes; the limit is %d", len(g.EventName), MaxGoalEventNameLen)
	case g.EventName == ReservedGoalEvent:
		return bad("event name %q is reserved", ReservedGoalEvent)
	case g.PagePath != "" && g.PagePath[0] != '/':
		return bad("page path %q must start with /", g.PagePath)
	case len(g.PagePath) > MaxGoalPagePathLen:
		return bad("page path is %d bytes; the limit is %d", len(g.PagePath), MaxGoalPagePathLen)
	case g.DisplayName == "":
		return bad("needs a display name")
	case len(g.DisplayName) > MaxGoalDisplayNameLen:
		return bad("display name is %d bytes; the limit is %d", len(g.DisplayName), MaxGoalDisplayNameLen)
	}
	return nil
}

// ValidGoalID reports whether id can name a goal (it appears in URLs).
func ValidGoalID(id string) bool {
	if id == "" || len(id) > MaxGoalIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// cleanText is valid UTF-8 with no white space at either end.
func cleanText(s string) bool {
	return utf8.ValidString(s) && strings.TrimSpace(s) == s
}

// GoalConflict finds the goal of s that g clashes with (Plausible's unique
// indexes: event name, page path and display name per site; and the id)
// and names the clashing field: "id", "event_name", "page_path" or
// "display_name".
func (s *Site) GoalConflict(g *Goal) (existing Goal, field string, ok bool) {
	return goalConflictIn(s.Goals, g)
}

func goalConflictIn(goals []Goal, g *Goal) (Goal, string, bool) {
	for _, o := range goals {
		switch {
		case o.ID == g.ID:
			return o, "id", true
		case g.EventName != "" && o.EventName == g.EventName:
			return o, "event_name", true
		case g.PagePath != "" && o.PagePath == g.PagePath:
			return o, "page_path", true
		case o.DisplayName == g.DisplayName:
			return o, "display_name", true
		}
	}
	return Goal{}, "", false
}

// goalConflict is GoalConflict as an error wrapping ErrGoalExists.
func goalConflict(goals []Goal, g *Goal) error {
	o, field, ok := goalConflictIn(goals, g)
	if !ok {
		return nil
	}
	return fmt.Errorf("%w: goal %q has the same %s", ErrGoalExists, o.ID, field)
}

// CheckGoals checks a whole goal list as a site record holds it: at most
// MaxGoals, each valid, no two sharing an id, event name, page path or
// display name.
func CheckGoals(goals []Goal) error {
	if len(goals) > MaxGoals {
		return fmt.Errorf("%w: %d goals", ErrTooManyGoals, len(goals))
	}
	for i := range goals {
		if err := CheckGoal(&goals[i]); err != nil {
			return err
		}
		if err := goalConflict(goals[:i], &goals[i]); err != nil {
			return err
		}
	}
	return nil
}
