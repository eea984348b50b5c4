package rollup

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"
)

// sketchCacheBytes bounds the decoded visitor sets kept for queries.
const sketchCacheBytes = 64 << 20

// rowCacheBytes bounds the merged rowsets kept for queries.
const rowCacheBytes = 32 << 20

// sketchCache keeps decoded visitor sets (and their estimates) of buckets
// that ended at least an hour ago, keyed by their H key: a 30-day query
// then merges sets already in memory instead of decoding dense sketches,
// and a daily series reads each finished day's estimate from here.
//
// A finished bucket still changes when a late event arrives. apply calls
// touch for every sketch it writes; if any of them is cacheable, it
// commits holding gate exclusively and drops those keys before letting
// queries in again. Queries hold gate shared from before they read a
// value until after they cache it, so no query can cache a value that a
// commit has replaced. Batches that touch only current buckets (nearly
// all) never take gate.
type sketchCache struct {
	gate sync.RWMutex

	mu      sync.Mutex
	m       map[string]*cachedSet // by sketch set key + composite
	buckets map[string][]string   // sketch set key -> its cached keys
	order   []string              // insertion order, for eviction
	bytes   int
	max     int
	pending [][]byte // cacheable keys written by the batch being applied
	now     func() time.Time

	// ranges holds merged sets over exact finished ranges (read.go);
	// gen moves whenever a commit replaces a cached bucket, which makes
	// every range cached before it stale.
	ranges map[string]rangeEntry
	gen    uint64

	// rows holds the merged values of finished rowsets by key (read.go):
	// a rowset written in many batches is a stack of merge operands that
	// Pebble would otherwise merge again on every read (a 30-day series
	// of a busy site merged thousands of page rows per day per request).
	// Entries are plain byte slices, which the GC does not scan.
	rows     map[string][]byte
	rowBytes int
	rowMax   int
	// commits moves before and after every commit: a rowset read from an
	// iterator opened before a commit may be stale, so it is cached only
	// when commits has not moved since the iterator was opened.
	commits atomic.Uint64
}

type rangeEntry struct {
	e   *cachedSet
	gen uint64
}

type cachedSet struct {
	set      visitorSet
	estimate uint64
	size     int
}

func newSketchCache(max int, now func() time.Time) *sketchCache {
	return &sketchCache{m: make(map[string]*cachedSet), buckets: make(map[string][]string),
		ranges: make(map[string]rangeEntry), max: max, now: now,
		rows: make(map[string][]byte), rowMax: rowCacheBytes}
}

// cacheable reports whether the bucket of an H or R key ended an hour ago.
func cacheable(key []byte, now time.Time) bool {
	if len(key) < 6 {
		return false
	}
	period := binary.BigEndian.Uint32(key[2:6])
	nowHour := hourOf(now.UnixMilli())
	switch key[1] {
	case granHour, granCross:
		return period+2 <= nowHour
	case granDay:
		return (period+1)*24+1 <= nowHour
	case granMonth:
		return uint32(monthStart(period+1))*24+1 <= nowHour
	}
	return false
}

// touch records a sketch key written by the current batch (apply holds
// the writer lock).
func (c *sketchCache) touch(key []byte) {
	if cacheable(key, c.now()) {
		c.pending = append(c.pending, append([]byte(nil), key...))
	}
}

// commit runs fn (the batch commit); when the batch wrote cacheable keys,
// it holds queries out and drops those keys before they come back.
func (c *sketchCache) commit(fn func() error) error {
	c.commits.Add(1)
	defer c.commits.Add(1)
	if len(c.pending) == 0 {
		return fn()
	}
	c.gate.Lock()
	defer c.gate.Unlock()
	defer func() { c.pending = c.pending[:0] }()
	if err := fn(); err != nil {
		return err
	}
	c.mu.Lock()
	for _, k := range c.pending {
		for _, full := range c.buckets[string(k)] {
			if e := c.m[full]; e != nil {
				c.bytes -= e.size
				delete(c.m, full)
			}
		}
		delete(c.buckets, string(k))
		if v, ok := c.rows[string(k)]; ok {
			c.rowBytes -= len(k) + len(v)
			delete(c.rows, string(k))
		}
	}
	c.gen++
	c.mu.Unlock()
	return nil
}

func (c *sketchCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// getRange returns a merged range set that is still valid.
func (c *sketchCache) getRange(key string) *cachedSet {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.ranges[key]
	if !ok || r.gen != c.gen {
		return nil
	}
	return r.e
}

// putRange caches a merged range set read at generation gen (dropped if a
// commit replaced a bucket since).
func (c *sketchCache) putRange(key string, e *cachedSet, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if _, ok := c.ranges[key]; !ok {
		c.ranges[key] = rangeEntry{e, gen}
		c.order = append(c.order, key)
		c.bytes += e.size
		c.evict()
	}
}

// discard forgets the pending keys of a batch that was not committed.
func (c *sketchCache) discard() { c.pending = c.pending[:0] }

// get returns the cached set of key (a sketch set's key, bucketLen bytes,
// then the entry's composite), or decodes value (the entry's bytes),
// caching it when the bucket is finished. Callers hold gate shared.
func (c *sketchCache) get(key []byte, bucketLen int, value []byte) (*cachedSet, error) {
	c.mu.Lock()
	e := c.m[string(key)]
	c.mu.Unlock()
	if e != nil {
		return e, nil
	}
	e = &cachedSet{size: 64 + len(key) + 2*len(value)}
	if err := e.set.addValue(value); err != nil {
		return nil, err
	}
	e.estimate = e.set.estimate()
	if !cacheable(key, c.now()) {
		return e, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[string(key)]; !ok {
		k := string(key)
		c.m[k] = e
		bk := k[:bucketLen]
		c.buckets[bk] = append(c.buckets[bk], k)
		c.order = append(c.order, k)
		c.bytes += e.size
		c.evict()
	}
	return e, nil
}

// evict drops the oldest entries past the byte budget. Callers hold mu.
func (c *sketchCache) evict() {
	i := 0
	for c.bytes > c.max && i < len(c.order) {
		k := c.order[i]
		if e := c.m[k]; e != nil {
			c.bytes -= e.size
			delete(c.m, k)
		} else if r, ok := c.ranges[k]; ok {
			c.bytes -= r.e.size
			delete(c.ranges, k)
		}
		i++
	}
	if i > 0 {
		c.order = append(c.order[:0], c.order[i:]...)
	}
	if len(c.order) > 4*len(c.m)+1024 {
		kept := c.order[:0]
		for _, k := range c.order {
			if _, ok := c.ranges[k]; ok || c.m[k] != nil {
				kept = append(kept, k)
			}
		}
		for k, r := range c.ranges {
			if r.gen != c.gen {
				c.bytes -= r.e.size
				delete(c.ranges, k)
			}
		}
		c.order = kept
	}
}

// rowSeq is read before opening the iterator whose rowsets go to putRow.
func (c *sketchCache) rowSeq() uint64 { return c.commits.Load() }

// getRow returns the cached merged rowset of a row key.
func (c *sketchCache) getRow(key []byte) ([]byte, bool) {
	c.mu.Lock()
	v, ok := c.rows[string(key)]
	c.mu.Unlock()
	return v, ok
}

// putRow caches a copy of the merged rowset of a finished bucket, read
// from an iterator opened at rowSeq seq, unless a commit has run since.
func (c *sketchCache) putRow(key, value []byte, seq uint64) {
	if seq&1 != 0 || !cacheable(key, c.now()) || len(key)+len(value) > c.rowMax/16 {
		return
	}
	v := append([]byte(nil), value...)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.commits.Load() != seq {
		return
	}
	if _, ok := c.rows[string(key)]; ok {
		return
	}
	c.rows[string(key)] = v
	c.rowBytes += len(key) + len(v)
	if c.rowBytes <= c.rowMax {
		return
	}
	for k, old := range c.rows { // past the budget: drop a quarter, any
		if c.rowBytes <= c.rowMax*3/4 {
			break
		}
		if k != string(key) {
			c.rowBytes -= len(k) + len(old)
			delete(c.rows, k)
		}
	}
}

// forgetAll drops every cached set, range and rowset. A commit that
// deletes buckets without writing them again (a rebuilt day whose entity
// is gone from it) touches no key; it calls this after committing.
func (c *sketchCache) forgetAll() {
	c.gate.Lock()
	defer c.gate.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.m)
	clear(c.buckets)
	clear(c.ranges)
	clear(c.rows)
	c.order = c.order[:0]
	c.bytes, c.rowBytes = 0, 0
	c.gen++
}
