package edge

import (
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
)

// cacheShards spreads lock contention; a power of two keeps the modulo cheap.
const cacheShards = 64

// entryKind is what a code answers, decided when the entry is built.
type entryKind uint8

const (
	kindRedirect entryKind = iota
	kindNotFound
	kindGone
	kindLegal
	kindBlocked
	kindReview
)

// entry is the pre-built answer for one code. It is immutable once it is in
// the cache (only ref and slot change, ref atomically and slot under the
// shard lock), so a reader may keep the pointer after dropping the lock.
type entry struct {
	code         string
	kind         entryKind
	status       int    // HTTP status of the answer
	location     []byte // redirects: the destination, byte for byte
	cacheControl []byte // redirects without expiry: the pre-built header value
	maxAge       int64  // redirects: seconds, before clamping to the expiry
	public       bool   // redirects: permanent, so shared caches may keep it
	expiresAt    int64  // Unix ms; 0 means never
	body         []byte // pages: the HTML

	ref  atomic.Uint32 // CLOCK reference bit
	slot int32         // index in the shard's ring; guarded by the shard lock
}

// cache is a bounded map from code to entry, sharded, with CLOCK eviction.
// Each shard has a generation that every invalidation bumps: a miss reads
// the generation before it reads Pebble and inserts only if it is
// unchanged, so a load that raced with an invalidation cannot put the stale
// answer back.
type cache struct {
	seed   maphash.Seed
	shards [cacheShards]cacheShard

	entries     atomic.Int64
	evictions   *metrics.Counter
	invalidated *metrics.Counter
}

type cacheShard struct {
	mu    sync.RWMutex
	m     map[string]*entry
	ring  []*entry // CLOCK ring; nil slots are listed in free
	free  []int32
	hand  int
	limit int
	gen   atomic.Uint64
	_     [40]byte // keep neighbouring shard locks off one cache line
}

func newCache(maxEntries int, set *metrics.Set) *cache {
	c := &cache{
		seed:        maphash.MakeSeed(),
		evictions:   set.GetOrCreateCounter("waymark_edge_cache_evictions_total"),
		invalidated: set.GetOrCreateCounter("waymark_edge_cache_invalidations_total"),
	}
	limit := max(1, (maxEntries+cacheShards-1)/cacheShards)
	for i := range c.shards {
		c.shards[i].m = make(map[string]*entry)
		c.shards[i].limit = limit
	}
	return c
}

func (c *cache) shardOf(code []byte) *cacheShard {
	return &c.shards[maphash.Bytes(c.seed, code)%cacheShards]
}

func (c *cache) shardOfString(code string) *cacheShard {
	return &c.shards[maphash.String(c.seed, code)%cacheShards]
}

// get returns the entry for code, or nil. It does not allocate.
func (c *cache) get(code []byte) *entry {
	sh := c.shardOf(code)
	sh.mu.RLock()
	e := sh.m[string(code)]
	sh.mu.RUnlock()
	if e != nil && e.ref.Load() == 0 {
		e.ref.Store(1)
	}
	return e
}

// generation is read before loading code from the store; pass it to add.
func (c *cache) generation(code []byte) uint64 { return c.shardOf(code).gen.Load() }

// add inserts e unless the shard was invalidated since gen was read.
func (c *cache) add(gen uint64, e *entry) {
	sh := c.shardOfString(e.code)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.gen.Load() != gen {
		return
	}
	if old := sh.m[e.code]; old != nil {
		e.slot = old.slot
		sh.ring[e.slot] = e
		sh.m[e.code] = e
		return
	}
	var slot int32
	switch {
	case len(sh.free) > 0:
		slot = sh.free[len(sh.free)-1]
		sh.free = sh.free[:len(sh.free)-1]
	case len(sh.ring) < sh.limit:
		slot = int32(len(sh.ring))
		sh.ring = append(sh.ring, nil)
	default:
		slot = sh.evict()
		c.evictions.Inc()
		c.entries.Add(-1)
	}
	e.slot = slot
	sh.ring[slot] = e
	sh.m[e.code] = e
	c.entries.Add(1)
}

// evict frees one slot of a full ring: the first entry under the hand whose
// reference bit is clear, clearing bits as the hand passes.
func (sh *cacheShard) evict() int32 {
	for {
		if sh.hand >= len(sh.ring) {
			sh.hand = 0
		}
		v := sh.ring[sh.hand]
		if v.ref.Load() != 0 {
			v.ref.Store(0)
			sh.hand++
			continue
		}
		delete(sh.m, v.code)
		slot := int32(sh.hand)
		sh.hand++
		return slot
	}
}

// invalidate drops code's entry, positive or negative, and fences off any
// load of code that is in flight.
func (c *cache) invalidate(code string) {
	sh := c.shardOfString(code)
	sh.mu.Lock()
	sh.gen.Add(1)
	if e := sh.m[code]; e != nil {
		delete(sh.m, code)
		sh.ring[e.slot] = nil
		sh.free = append(sh.free, e.slot)
		c.entries.Add(-1)
	}
	sh.mu.Unlock()
	c.invalidated.Inc()
}

// invalidateAll empties the cache and fences off every load in flight.
func (c *cache) invalidateAll() {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		sh.gen.Add(1)
		n := len(sh.m)
		clear(sh.m)
		sh.ring, sh.free, sh.hand = sh.ring[:0], sh.free[:0], 0
		sh.mu.Unlock()
		c.entries.Add(-int64(n))
	}
	c.invalidated.Inc()
}

// len is the number of cached entries.
func (c *cache) len() int64 { return c.entries.Load() }
