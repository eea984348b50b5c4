package query

import "testing"

func TestDimFilterMatch(t *testing.T) {
	for _, c := range []struct {
		f    DimFilter
		v    string
		want bool
	}{
		{DimFilter{"page", "is", []string{"/a", "/b"}}, "/b", true},
		{DimFilter{"page", "is", []string{"/a"}}, "/A", false}, // is is case-sensitive
		{DimFilter{"page", "is_not", []string{"/a"}}, "/a", false},
		{DimFilter{"page", "is_not", []string{"/a"}}, "", true},
		{DimFilter{"page", "contains", []string{"BLOG"}}, "/blog/x", true}, // contains is not
		{DimFilter{"page", "contains", []string{"shop"}}, "/blog/x", false},
		{DimFilter{"source", "is", []string{""}}, "", true}, // "" is none (direct)
	} {
		if got := c.f.Match(c.v); got != c.want {
			t.Errorf("%+v.Match(%q) = %v; want %v", c.f, c.v, got, c.want)
		}
	}
}

func TestNeedsRaw(t *testing.T) {
	is := func(dim string) DimFilter { return DimFilter{dim, "is", []string{"x"}} }
	for _, c := range []struct {
		dimension string
		filters   []DimFilter
		want      bool
	}{
		{"", nil, false},
		{"", []DimFilter{is("page")}, false},
		{"", []DimFilter{is("page"), is("page")}, false},
		{"", []DimFilter{is("page"), is("country")}, true},   // rows are per dimension
		{"page", []DimFilter{is("page")}, false},             // a breakdown filtered on itself
		{"page", []DimFilter{is("country")}, true},           // ... or on another
		{"", []DimFilter{is("page"), is("nonsense")}, false}, // the backend refuses it
		{"", []DimFilter{is("page"), {"country", "matches", []string{"x"}}}, false},
	} {
		if got := NeedsRaw(c.dimension, c.filters); got != c.want {
			t.Errorf("NeedsRaw(%q, %v) = %v; want %v", c.dimension, c.filters, got, c.want)
		}
	}
}
