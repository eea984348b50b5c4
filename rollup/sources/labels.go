package sources

import "strings"

// Label returns what a breakdown shows for a stored value of a Stats API
// v2 dimension, as Plausible's query layer does
// (Plausible.Stats.SQL.Expression): an empty visit:source or
// visit:referrer is DirectNone; an empty visit:utm_*, visit:device,
// visit:browser, visit:browser_version, visit:os or visit:os_version is
// NotSet; a missing event:props:<name> is NoProp. Every other value, and
// every non-empty one, is returned unchanged.
func Label(dimension, stored string) string {
	if stored != "" {
		return stored
	}
	switch {
	case dimension == "visit:source" || dimension == "visit:referrer":
		return DirectNone
	case strings.HasPrefix(dimension, "visit:utm_"):
		return NotSet
	case strings.HasPrefix(dimension, "event:props:"):
		return NoProp
	}
	switch dimension {
	case "visit:device", "visit:browser", "visit:browser_version", "visit:os", "visit:os_version":
		return NotSet
	}
	return stored
}

// StoredValue is the inverse of Label for the values of an "is" or
// "is_not" filter (Plausible.Stats.SQL.WhereBuilder): DirectNone on
// visit:source, visit:referrer or a visit:utm_* dimension, and NotSet on
// any dimension, match the empty stored value. Other values are returned
// unchanged. Other operators (contains, matches) compare the filter text
// with the stored value as it is, as Plausible does; NoProp on a property
// means "the event has no such property", which the caller handles.
func StoredValue(dimension, filterValue string) string {
	switch filterValue {
	case NotSet:
		return ""
	case DirectNone:
		if dimension == "visit:source" || dimension == "visit:referrer" || strings.HasPrefix(dimension, "visit:utm_") {
			return ""
		}
	}
	return filterValue
}
