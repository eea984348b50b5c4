package sources

import "testing"

// Expectations from Plausible's lib/plausible/stats/sql/expression.ex
// (field_or_blank_value per dimension) and where_builder.ex (db_field_val).
func TestLabel(t *testing.T) {
	tests := []struct{ dim, stored, want string }{
		{"visit:source", "", "Direct / None"},
		{"visit:referrer", "", "Direct / None"},
		{"visit:source", "Google", "Google"},
		{"visit:utm_source", "", "(not set)"},
		{"visit:utm_medium", "", "(not set)"},
		{"visit:utm_campaign", "", "(not set)"},
		{"visit:utm_content", "", "(not set)"},
		{"visit:utm_term", "", "(not set)"},
		{"visit:utm_medium", "cpc", "cpc"},
		{"visit:device", "", "(not set)"},
		{"visit:browser", "", "(not set)"},
		{"visit:browser_version", "", "(not set)"},
		{"visit:os", "", "(not set)"},
		{"visit:os_version", "", "(not set)"},
		{"event:props:author", "", "(none)"},
		{"visit:country", "", ""},
		{"visit:entry_page", "", ""},
		{"event:page", "", ""},
	}
	for _, tt := range tests {
		if got := Label(tt.dim, tt.stored); got != tt.want {
			t.Errorf("Label(%q, %q) = %q; want %q", tt.dim, tt.stored, got, tt.want)
		}
	}
}

func TestStoredValue(t *testing.T) {
	tests := []struct{ dim, value, want string }{
		{"visit:source", "Direct / None", ""},
		{"visit:referrer", "Direct / None", ""},
		{"visit:utm_source", "Direct / None", ""},
		{"visit:utm_term", "Direct / None", ""},
		{"visit:source", "(not set)", ""},
		{"visit:utm_medium", "(not set)", ""},
		{"visit:browser", "(not set)", ""},
		{"visit:country", "(not set)", ""},
		{"visit:browser", "Direct / None", "Direct / None"},
		{"visit:source", "Google", "Google"},
		{"visit:source", "direct / none", "direct / none"}, // exact label only
		{"event:props:author", "(none)", "(none)"},
	}
	for _, tt := range tests {
		if got := StoredValue(tt.dim, tt.value); got != tt.want {
			t.Errorf("StoredValue(%q, %q) = %q; want %q", tt.dim, tt.value, got, tt.want)
		}
	}
}
