package clickhouse

import (
	"container/list"
	"sync"

	"github.com/VictoriaMetrics/metrics"
)

// rowCache is the byte-bounded LRU behind the link and site row caches
// (linkcache.go, sitecache.go): decoded rows under a key that names
// their version, so an entry never goes stale, it only ages out. Least
// recently used out first; an entry bigger than the bound is not kept.
type rowCache[K comparable, R any] struct {
	mu      sync.Mutex
	max     int
	bytes   int
	order   *list.List // front: most recently used
	entries map[K]*list.Element
	size    func(K, []R) int // an entry's bytes, roughly

	m rowCacheMetrics
}

type rowCacheEntry[K comparable, R any] struct {
	key   K
	rows  []R
	bytes int
}

// rowCacheMetrics are one cache's waymark_clickhouse_<name>_* series
// (the bytes gauge sums every Backend's cache over the set).
type rowCacheMetrics struct {
	hits, misses, evictions *metrics.Counter
	bytes                   *metrics.Gauge
}

func newRowCacheMetrics(s *metrics.Set, prefix, name string) rowCacheMetrics {
	p := prefix + name + "_"
	return rowCacheMetrics{hits: s.GetOrCreateCounter(p + "hits_total"), misses: s.GetOrCreateCounter(p + "misses_total"),
		evictions: s.GetOrCreateCounter(p + "evictions_total"), bytes: s.GetOrCreateGauge(p+"bytes", nil)}
}

func newRowCache[K comparable, R any](maxBytes int, m rowCacheMetrics, size func(K, []R) int) *rowCache[K, R] {
	return &rowCache[K, R]{max: maxBytes, order: list.New(), entries: map[K]*list.Element{}, size: size, m: m}
}

// get is the rows of k, and whether they were cached.
func (c *rowCache[K, R]) get(k K) ([]R, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[k]
	if !ok {
		c.m.misses.Inc()
		return nil, false
	}
	c.m.hits.Inc()
	c.order.MoveToFront(el)
	return el.Value.(*rowCacheEntry[K, R]).rows, true
}

// put caches rows under k, evicting the least recently used past the
// bound.
func (c *rowCache[K, R]) put(k K, rows []R) {
	n := c.size(k, rows)
	if n > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[k]; ok {
		c.order.MoveToFront(el)
		return
	}
	c.entries[k] = c.order.PushFront(&rowCacheEntry[K, R]{key: k, rows: rows, bytes: n})
	c.add(n)
	for c.bytes > c.max {
		el := c.order.Back()
		e := el.Value.(*rowCacheEntry[K, R])
		c.order.Remove(el)
		delete(c.entries, e.key)
		c.add(-e.bytes)
		c.m.evictions.Inc()
	}
}

func (c *rowCache[K, R]) add(n int) {
	c.bytes += n
	c.m.bytes.Add(float64(n))
}
