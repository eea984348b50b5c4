package ingest

import (
	"hash/maphash"
	"math"
)

// uaCacheSets and uaCacheWays size the user-agent cache: 16,384 sets of
// 8 entries, 131,072 user agents in about 2 MiB. A day of real traffic has
// thousands to tens of thousands of distinct user agents; the cache must
// hold that working set, or every event pays a parse and a crawler check.
const (
	uaCacheSets = 1 << 14
	uaCacheWays = 8
)

// uaCache remembers what user agents told us. It is set-associative with
// least-recently-used eviction in each set, so a full cache replaces its
// coldest entries instead of forgetting everything, and its memory is fixed
// at creation. Entries hold no pointers (the strings are interned in small
// tables), so the garbage collector never scans it.
//
// An entry is keyed by a 64-bit hash of the user agent under a random
// per-process seed, not by the user agent itself: two distinct user agents
// in one set sharing a hash is a 2^-64 event per pair that no client can
// provoke without the seed, and would only mislabel a browser.
//
// A uaCache is used by one goroutine.
type uaCache struct {
	seed    maphash.Seed
	sets    [][uaCacheWays]uaEntry
	mask    uint64
	clock   uint32
	strings []string // interned browser, OS and device names; 0 is ""
	index   map[string]uint16
}

type uaEntry struct {
	key  uint64 // 0: empty
	used uint32 // clock at the last hit
	browser, os,
	device uint16
	bot bool
}

func newUACache(sets int) *uaCache {
	if sets&(sets-1) != 0 || sets <= 0 {
		panic("BUG: uaCache sets must be a power of two")
	}
	return &uaCache{
		seed:    maphash.MakeSeed(),
		sets:    make([][uaCacheWays]uaEntry, sets),
		mask:    uint64(sets - 1),
		strings: []string{""},
		index:   map[string]uint16{"": 0},
	}
}

func (c *uaCache) hash(ua []byte) uint64 {
	h := maphash.Bytes(c.seed, ua)
	if h == 0 {
		h = 1
	}
	return h
}

func (c *uaCache) get(h uint64) (uaInfo, bool) {
	set := &c.sets[h&c.mask]
	for i := range set {
		if e := &set[i]; e.key == h {
			c.clock++
			e.used = c.clock
			return uaInfo{browser: c.strings[e.browser], os: c.strings[e.os], device: c.strings[e.device], bot: e.bot}, true
		}
	}
	return uaInfo{}, false
}

// put stores info for h in an empty way of its set, or in place of the
// least recently used one.
func (c *uaCache) put(h uint64, info uaInfo) {
	set := &c.sets[h&c.mask]
	victim := 0
	for i := range set {
		if set[i].key == 0 {
			victim = i
			break
		}
		if age(c.clock, set[i].used) > age(c.clock, set[victim].used) {
			victim = i
		}
	}
	b, ok1 := c.intern(info.browser)
	o, ok2 := c.intern(info.os)
	d, ok3 := c.intern(info.device)
	if !ok1 || !ok2 || !ok3 {
		return
	}
	c.clock++
	set[victim] = uaEntry{key: h, used: c.clock, browser: b, os: o, device: d, bot: info.bot}
}

// age is how long ago used was, correct across the clock wrapping.
func age(now, used uint32) uint32 { return now - used }

// intern returns the index of s in the string table. The parser knows a
// few dozen names; should the table ever fill, the entry is not cached
// rather than the table growing without bound.
func (c *uaCache) intern(s string) (uint16, bool) {
	if i, ok := c.index[s]; ok {
		return i, true
	}
	if len(c.strings) > math.MaxUint16 {
		return 0, false
	}
	i := uint16(len(c.strings))
	c.strings = append(c.strings, s)
	c.index[s] = i
	return i, true
}

// len counts the cached user agents (tests).
func (c *uaCache) len() int {
	n := 0
	for i := range c.sets {
		for _, e := range c.sets[i] {
			if e.key != 0 {
				n++
			}
		}
	}
	return n
}
