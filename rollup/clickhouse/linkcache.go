package clickhouse

// The link row cache (DESIGN.md, "Link rows"): the decoded rows of one
// link's dimension in one clean hour, under the hour's version. A clean
// hour's rows of a version never change, and a late click gives its hour
// a new version (markLate, then the materializer), so a key of an older
// version is never asked again and ages out: the cache cannot serve
// stale rows. Bounded in bytes, least recently used out first.

// DefaultLinkRowCacheBytes bounds the cache when BackendConfig leaves it 0.
const DefaultLinkRowCacheBytes = 64 << 20

type linkRowKey struct {
	code, dim string
	hour      int64 // the day's first hour for a day's rows
	version   uint64
	day       bool // a day's rows (linkdays.go) under its marker's version
}

// linkRow is one value's row of an hour or a day: non-bot and bot clicks
// and the non-bot visitors (read-only once cached); a day row also
// carries its set's estimate, computed when it was written.
type linkRow struct {
	value        string
	clicks, bots int64
	visitors     *linkSet
	estimate     uint64
}

// linkRowCache holds link rows by linkRowKey.
type linkRowCache = rowCache[linkRowKey, linkRow]

func newLinkRowCache(maxBytes int, m rowCacheMetrics) *linkRowCache {
	return newRowCache(maxBytes, m, func(k linkRowKey, rows []linkRow) int {
		n := 96 + len(k.code) + len(k.dim)
		for _, r := range rows {
			n += 48 + len(r.value) + r.visitors.size()
		}
		return n
	})
}
