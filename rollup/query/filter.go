package query

import "strings"

// SiteDimensions are the native API's site dimension names, in the order
// the API documents them. Link breakdowns take country, device, browser,
// os, referrer, utm_source, utm_medium and utm_campaign.
var SiteDimensions = []string{
	"page", "entry_page", "exit_page", "referrer", "source", "channel",
	"utm_source", "utm_medium", "utm_campaign", "utm_term", "utm_content",
	"country", "region", "city", "device", "browser", "browser_version", "os", "os_version",
	"event", "visitor_type",
}

var siteDimensions = func() map[string]bool {
	m := make(map[string]bool, len(SiteDimensions))
	for _, d := range SiteDimensions {
		m[d] = true
	}
	return m
}()

// DimFilter keeps the rows of one dimension whose value matches: Op is
// "is", "is_not" or "contains" (any of Values).
type DimFilter struct {
	Dimension string
	Op        string
	Values    []string
}

// Match reports whether v, a stored value ("" for none), passes f.
func (f *DimFilter) Match(v string) bool {
	any := false
	for _, w := range f.Values {
		switch f.Op {
		case "is", "is_not":
			any = any || v == w
		case "contains":
			any = any || strings.Contains(strings.ToLower(v), strings.ToLower(w))
		}
	}
	if f.Op == "is_not" {
		return !any
	}
	return any
}

// NeedsRaw reports whether a site query must be answered from the raw
// events: its filters are all valid but name more than one dimension, or
// a breakdown (dimension, "" for none) is filtered on another dimension.
// Rows are kept per dimension, not per combination.
func NeedsRaw(dimension string, filters []DimFilter) bool {
	if len(filters) == 0 {
		return false
	}
	dims := make(map[string]bool)
	for _, f := range filters {
		if !siteDimensions[f.Dimension] || (f.Op != "is" && f.Op != "is_not" && f.Op != "contains") {
			return false // the backend reports it
		}
		dims[f.Dimension] = true
	}
	return len(dims) > 1 || (dimension != "" && !dims[dimension])
}
