package clickhouse

import (
	"container/list"
	"sync"

	"github.com/VictoriaMetrics/metrics"
)

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

type linkCacheEntry struct {
	key   linkRowKey
	rows  []linkRow
	bytes int
}

type linkRowCache struct {
	mu      sync.Mutex
	max     int
	bytes   int
	order   *list.List // front: most recently used
	entries map[linkRowKey]*list.Element

	m linkCacheMetrics
}

// linkCacheMetrics are the waymark_clickhouse_link_row_cache_* series
// (the bytes gauge sums every Backend's cache over the set).
type linkCacheMetrics struct {
	hits, misses, evictions *metrics.Counter
	bytes                   *metrics.Gauge
}

func newLinkCacheMetrics(s *metrics.Set, prefix string) linkCacheMetrics {
	p := prefix + "link_row_cache_"
	return linkCacheMetrics{hits: s.GetOrCreateCounter(p + "hits_total"), misses: s.GetOrCreateCounter(p + "misses_total"),
		evictions: s.GetOrCreateCounter(p + "evictions_total"), bytes: s.GetOrCreateGauge(p+"bytes", nil)}
}

func newLinkRowCache(maxBytes int, m linkCacheMetrics) *linkRowCache {
	return &linkRowCache{max: maxBytes, order: list.New(), entries: map[linkRowKey]*list.Element{}, m: m}
}

// get is the rows of k, and whether they were cached.
func (c *linkRowCache) get(k linkRowKey) ([]linkRow, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[k]
	if !ok {
		c.m.misses.Inc()
		return nil, false
	}
	c.m.hits.Inc()
	c.order.MoveToFront(el)
	return el.Value.(*linkCacheEntry).rows, true
}

// put caches rows under k, evicting the least recently used past the
// bound (an entry bigger than the bound is not kept).
func (c *linkRowCache) put(k linkRowKey, rows []linkRow) {
	n := 96 + len(k.code) + len(k.dim)
	for _, r := range rows {
		n += 48 + len(r.value) + r.visitors.size()
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
	c.entries[k] = c.order.PushFront(&linkCacheEntry{key: k, rows: rows, bytes: n})
	c.add(n)
	for c.bytes > c.max {
		el := c.order.Back()
		e := el.Value.(*linkCacheEntry)
		c.order.Remove(el)
		delete(c.entries, e.key)
		c.add(-e.bytes)
		c.m.evictions.Inc()
	}
}

func (c *linkRowCache) add(n int) {
	c.bytes += n
	c.m.bytes.Add(float64(n))
}
