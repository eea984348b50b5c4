package clickhouse

import (
	"container/list"
	"sync"

	"github.com/VictoriaMetrics/metrics"
)

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

type siteCacheEntry struct {
	key   siteRowKey
	rows  []siteRow
	bytes int
}

type siteRowCache struct {
	mu      sync.Mutex
	max     int
	bytes   int
	order   *list.List // front: most recently used
	entries map[siteRowKey]*list.Element

	m siteCacheMetrics
}

// siteCacheMetrics are the waymark_clickhouse_site_row_cache_* series
// (the bytes gauge sums every Backend's cache over the set).
type siteCacheMetrics struct {
	hits, misses, evictions *metrics.Counter
	bytes                   *metrics.Gauge
}

func newSiteCacheMetrics(s *metrics.Set, prefix string) siteCacheMetrics {
	p := prefix + "site_row_cache_"
	return siteCacheMetrics{hits: s.GetOrCreateCounter(p + "hits_total"), misses: s.GetOrCreateCounter(p + "misses_total"),
		evictions: s.GetOrCreateCounter(p + "evictions_total"), bytes: s.GetOrCreateGauge(p+"bytes", nil)}
}

func newSiteRowCache(maxBytes int, m siteCacheMetrics) *siteRowCache {
	return &siteRowCache{max: maxBytes, order: list.New(), entries: map[siteRowKey]*list.Element{}, m: m}
}

// get is the rows of k, and whether they were cached.
func (c *siteRowCache) get(k siteRowKey) ([]siteRow, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[k]
	if !ok {
		c.m.misses.Inc()
		return nil, false
	}
	c.m.hits.Inc()
	c.order.MoveToFront(el)
	return el.Value.(*siteCacheEntry).rows, true
}

// put caches rows under k, evicting the least recently used past the
// bound (an entry bigger than the bound is not kept).
func (c *siteRowCache) put(k siteRowKey, rows []siteRow) {
	n := 96 + len(k.site) + len(k.dim)
	for i := range rows {
		n += 128 + len(rows[i].value)
		if rows[i].set != nil {
			n += rows[i].set.size()
		}
	}
	if n > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[k]; ok {
		c.order.MoveToFront(el)
		return
	}
	c.entries[k] = c.order.PushFront(&siteCacheEntry{key: k, rows: rows, bytes: n})
	c.add(n)
	for c.bytes > c.max {
		el := c.order.Back()
		e := el.Value.(*siteCacheEntry)
		c.order.Remove(el)
		delete(c.entries, e.key)
		c.add(-e.bytes)
		c.m.evictions.Inc()
	}
}

func (c *siteRowCache) add(n int) {
	c.bytes += n
	c.m.bytes.Add(float64(n))
}
