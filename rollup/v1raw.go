package rollup

import (
	"github.com/waymark/waymark/rollup/query"
)

// The native site endpoints answer filters the rollups cannot (several
// dimensions, or a breakdown filtered on another one) from the raw events,
// through the same engine as /api/v2/query: the v1 request is written as a
// v2 query, evaluated, and the rows mapped back. One definition of every
// metric, wherever it is asked.

// rawSite answers a site query from the raw events (query.RawSite over
// this store's raw events).
func (a *Aggregator) rawSite(site string, r query.Range, g query.Granularity, dimension string, filters []query.DimFilter) ([]query.RawRow, error) {
	return query.RawSite(site, r, g, dimension, filters, a.cfg.Now(), rawSource{a}, a.v2Config())
}
