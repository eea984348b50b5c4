package rollup

import (
	"slices"
	"testing"

	"github.com/waymark/waymark/rollup/query"
)

// The API's site dimensions (query.SiteDimensions, which query.NeedsRaw
// knows) are exactly those the rollups keep rows for.
func TestSiteDimensionsMatchRows(t *testing.T) {
	var rows []string
	for name := range siteDims {
		rows = append(rows, name)
	}
	slices.Sort(rows)
	api := slices.Sorted(slices.Values(query.SiteDimensions))
	if !slices.Equal(rows, api) {
		t.Fatalf("rollup rows keep %v; query.SiteDimensions names %v", rows, api)
	}
}
