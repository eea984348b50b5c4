package plausible

import (
	"regexp"
	"strings"
	"time"
)

// Site is what Parse and Evaluate need to know about the queried site.
type Site struct {
	ID string
	// Domain is the site_id of the API and of the query echo.
	Domain string
	// Timezone is an IANA name ("Europe/Tallinn", "Etc/UTC"); empty means
	// Etc/UTC.
	Timezone string
	Goals    []Goal
	// StatsStart is the time of the site's first event; "all" starts on its
	// date in the site timezone (today when zero).
	StatsStart time.Time
}

// Goal is a configured conversion: a custom event name, or a page path
// pattern in which * and ** both match any run of characters.
type Goal struct {
	ID          string
	DisplayName string
	EventName   string
	PagePath    string
	// CustomProps must all match (key equal to value) for an event goal.
	CustomProps []Prop
}

// Name is the goal's display name as Plausible derives it: the configured
// display name, else "Visit "+path for page goals, else the event name,
// trimmed (lib/plausible/goal.ex maybe_put_display_name).
func (g Goal) Name() string {
	switch {
	case g.DisplayName != "":
		return strings.TrimSpace(g.DisplayName)
	case g.EventName != "":
		return strings.TrimSpace(g.EventName)
	default:
		return strings.TrimSpace("Visit " + g.PagePath)
	}
}

// isEvent: a goal with an event name is an event goal even if it also has
// a path (Plausible.Goal.type/1).
func (g Goal) isEvent() bool { return g.EventName != "" }

// pageRegex is Plausible's page_regex (stats/filters/utils.ex): everything
// literal except "|" (alternation across the anchors) and "*"/"**" (".*").
func pageRegex(expr string) string {
	escaped := regexp.QuoteMeta(expr)
	escaped = strings.ReplaceAll(escaped, `\|`, "|")
	escaped = strings.ReplaceAll(escaped, `\*\*`, ".*")
	escaped = strings.ReplaceAll(escaped, `\*`, ".*")
	return "^" + escaped + "$"
}

// compiledGoal is a goal ready to match events.
type compiledGoal struct {
	Goal
	name string
	// re is page_regex(path): used by the event:goal dimension for every
	// page goal, and by goal filters when the path contains "*".
	re *regexp.Regexp
	// literal is true when a goal filter compares the path for equality.
	literal bool
}

func compileGoals(goals []Goal) []compiledGoal {
	out := make([]compiledGoal, len(goals))
	for i, g := range goals {
		c := compiledGoal{Goal: g, name: g.Name()}
		if !g.isEvent() {
			// QuoteMeta output is always a valid expression.
			c.re = regexp.MustCompile(pageRegex(g.PagePath))
			c.literal = !strings.Contains(g.PagePath, "*")
		}
		out[i] = c
	}
	return out
}
