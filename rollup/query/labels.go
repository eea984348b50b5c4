package query

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/waymark/waymark/rollup/plausible"
)

// Plausible's labels: the values its answers show for what the rollups
// store, and back. Every backend answers v2 (and the native API's raw
// path) with these.

// V2Dimensions maps the native API's site dimension names to Plausible's
// (the v1 endpoints answer what their rows cannot through a v2 query).
var V2Dimensions = map[string]string{
	"page": "event:page", "entry_page": "visit:entry_page", "exit_page": "visit:exit_page",
	"referrer": "visit:referrer", "source": "visit:source", "channel": "visit:channel",
	"utm_source": "visit:utm_source", "utm_medium": "visit:utm_medium", "utm_campaign": "visit:utm_campaign",
	"utm_term": "visit:utm_term", "utm_content": "visit:utm_content",
	"country": "visit:country", "device": "visit:device", "browser": "visit:browser", "os": "visit:os",
	"region": "visit:region", "city": "visit:city", "browser_version": "visit:browser_version",
	"os_version": "visit:os_version", "event": "event:name",
}

// BucketLabel is how Plausible labels the bucket starting at t by g (t in
// the query's zone).
func BucketLabel(t time.Time, g Granularity) string {
	if g == Hour {
		return t.Format(time.DateTime)
	}
	return t.Format(time.DateOnly)
}

// PlausibleValue turns a native filter value (a stored value) into the
// value Plausible shows and filters by.
func PlausibleValue(dim, v string) string {
	if dim == "visit:device" {
		return PlausibleLabel(dim, v)
	}
	if v == "" {
		return PlausibleLabel(dim, "")
	}
	return v
}

// StoredValue turns a Plausible label back into the stored value the
// native API answers with ("" for none).
func StoredValue(dim, v string) string {
	switch {
	case dim == "visit:device":
		return strings.ToLower(v)
	case dim == "visit:country" && v == "\x00\x00":
		return ""
	case v == "Direct / None" || v == "(not set)":
		return ""
	}
	return v
}

// PlausibleLabel is the value Plausible shows for a stored value.
func PlausibleLabel(dim, v string) string {
	switch dim {
	case "visit:device":
		switch v {
		case "desktop", "tv":
			return "Desktop"
		case "mobile":
			return "Mobile"
		case "tablet":
			return "Tablet"
		}
	case "visit:country":
		if v == "" {
			return "\x00\x00"
		}
	}
	if v != "" {
		return v
	}
	switch {
	case dim == "visit:source" || dim == "visit:referrer":
		return "Direct / None"
	case dim == "visit:channel":
		return "Direct"
	case strings.HasPrefix(dim, "visit:utm_"), dim == "visit:device", dim == "visit:browser", dim == "visit:os",
		dim == "visit:browser_version", dim == "visit:os_version":
		return "(not set)"
	}
	return v // visit:region: "" as Plausible shows it; visit:city: see PlausibleDimValue
}

// PlausibleDimValue is a row's dimension value: a string, but visit:city is
// Plausible's integer city_geoname_id (0 when unknown), as the raw engine
// gives it.
func PlausibleDimValue(dim, label string) plausible.Value {
	if dim == "visit:city" {
		if label == "" {
			return plausible.IntValue(0)
		}
		if n, err := strconv.ParseInt(label, 10, 64); err == nil {
			return plausible.IntValue(n)
		}
	}
	return plausible.StringValue(label)
}

func compareValues(x, y plausible.Value) int {
	switch {
	case x.Kind == plausible.Null || y.Kind == plausible.Null:
		return cmp.Compare(x.Kind, y.Kind)
	case x.Kind == plausible.String:
		return strings.Compare(x.Str, y.Str)
	case x.Kind == plausible.Float || y.Kind == plausible.Float:
		return cmp.Compare(numberOf(x), numberOf(y))
	}
	return cmp.Compare(x.Int, y.Int)
}

func numberOf(v plausible.Value) float64 {
	if v.Kind == plausible.Float {
		return v.Float
	}
	return float64(v.Int)
}

// V2Result orders and pages rows as q asks (order_by, then the dimensions;
// pagination) and wraps them; visitors, when asked, are named estimated.
// A backend that computes rows itself gives them here so that every
// backend orders, pages and labels alike.
func V2Result(q *plausible.Query, rows []plausible.Row) *plausible.Result {
	key := func(r *plausible.Row, k string) (plausible.Value, bool) {
		for j, m := range q.Metrics {
			if m == k {
				return r.Metrics[j], true
			}
		}
		for j, d := range q.Dimensions {
			if d == k && j < len(r.Dimensions) {
				return r.Dimensions[j], true
			}
		}
		return plausible.Value{}, false
	}
	slices.SortStableFunc(rows, func(x, y plausible.Row) int {
		for _, o := range q.OrderBy {
			vx, _ := key(&x, o.Key)
			vy, _ := key(&y, o.Key)
			if c := compareValues(vx, vy); c != 0 {
				if o.Desc {
					return -c
				}
				return c
			}
		}
		for j := range x.Dimensions {
			if c := compareValues(x.Dimensions[j], y.Dimensions[j]); c != 0 {
				return c
			}
		}
		return 0
	})
	total := len(rows)
	lo := min(q.Pagination.Offset, len(rows))
	hi := len(rows)
	if q.Pagination.Limit > 0 {
		hi = min(lo+q.Pagination.Limit, len(rows))
	}
	res := plausible.NewResult(q, rows[lo:hi], total)
	res.Estimated = []string{}
	if q.HasMetric("visitors") {
		res.Estimated = append(res.Estimated, "visitors")
	}
	return res
}
