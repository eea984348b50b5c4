package clickhouse

// The site row cache (DESIGN.md, "Visitor sets and the row cache"): the
// decoded rows of one site dimension in one clean unit, under the unit's
// version, and the day rows merged from a whole day of them, under the
// day's 24 versions. A clean unit's rows of a version never change, and a
// late event gives every unit it may change a new version (markLate, then
// the materializer), so a unit key of an older version is never asked
// again, and neither is a day key holding it: the cache cannot serve
// stale rows. Bounded in bytes, least recently used out first.

// DefaultSiteRowCacheBytes bounds the cache when BackendConfig leaves it 0.
const DefaultSiteRowCacheBytes = 128 << 20

// siteRowKey is a unit's rows of one dimension (day false: unit is an
// hour, version its version) or a day's merged rows (day true: unit is
// the day's first hour, version a hash of its 24 units' versions).
type siteRowKey struct {
	site, dim string
	unit      int64
	version   uint64
	day       bool
}

// siteRow is one decoded row: a term (siterows.go) of value at first
// hour f and last hour l, its counters and the visitors of its f = l
// rows (nil: none). Read-only once cached.
type siteRow struct {
	value string
	f, l  int64
	c     [nCounters]int64
	set   *linkSet
}

// siteRowCache holds site rows by siteRowKey.
type siteRowCache = rowCache[siteRowKey, siteRow]

func newSiteRowCache(maxBytes int, m rowCacheMetrics) *siteRowCache {
	return newRowCache(maxBytes, m, func(k siteRowKey, rows []siteRow) int {
		n := 96 + len(k.site) + len(k.dim)
		for i := range rows {
			n += 128 + len(rows[i].value)
			if rows[i].set != nil {
				n += rows[i].set.size()
			}
		}
		return n
	})
}
