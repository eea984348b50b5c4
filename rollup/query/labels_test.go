package query

import (
	"testing"

	"github.com/waymark/waymark/rollup/plausible"
)

// TestPlausibleLabels: the values Plausible shows for stored values
// (lib/plausible/stats, "Direct / None", "(not set)", capitalised
// devices), and that the native API gets its stored values back.
func TestPlausibleLabels(t *testing.T) {
	for _, c := range []struct{ dim, stored, label string }{
		{"visit:source", "", "Direct / None"},
		{"visit:referrer", "", "Direct / None"},
		{"visit:channel", "", "Direct"},
		{"visit:utm_source", "", "(not set)"},
		{"visit:browser", "", "(not set)"},
		{"visit:device", "mobile", "Mobile"},
		{"visit:device", "tv", "Desktop"},
		{"visit:source", "Google", "Google"},
		{"visit:region", "", ""},
	} {
		if got := PlausibleLabel(c.dim, c.stored); got != c.label {
			t.Errorf("PlausibleLabel(%s, %q) = %q; want %q", c.dim, c.stored, got, c.label)
		}
		if c.dim == "visit:channel" || c.stored == "tv" {
			continue // "Direct" is a channel's name too; tv shows as desktop
		}
		if got := StoredValue(c.dim, c.label); got != c.stored {
			t.Errorf("StoredValue(%s, %q) = %q; want %q", c.dim, c.label, got, c.stored)
		}
	}
	if v := PlausibleDimValue("visit:city", "2643743"); v.Kind != plausible.Int || v.Int != 2643743 {
		t.Errorf("city 2643743: %+v; want the integer GeoNames id", v)
	}
	if v := PlausibleDimValue("visit:city", ""); v.Kind != plausible.Int || v.Int != 0 {
		t.Errorf("unknown city: %+v; want 0", v)
	}
}
