package ingest

import (
	"hash/maphash"
)

// uaCacheSets and uaCacheWays size the user-agent cache: 16,384 sets of
// 8 entries, 131,072 user agents in 1 MiB. A day of real traffic has
// thousands to tens of thousands of distinct user agents; the cache must
// hold that working set, or every event pays a parse and a crawler check.
const (
	uaCacheSets = 1 << 14
	uaCacheWays = 8
)

// uaCache remembers what user agents told us. It is laid out for the
// writer's cache misses: with tens of thousands of distinct user agents the
// table does not stay in the CPU caches while redirects run, so a lookup
// costs what it touches. A set is one 64-byte line of eight slots, and a
// slot is one word: a 48-bit fingerprint of the user agent and the 16-bit
// index of its answer in a small table of distinct answers (a few hundred
// in real traffic: browser, version, OS and device combinations), which
// stays cached. A lookup reads one line; a hit at way i > 0 moves its slot
// to the front of the line (least recently used eviction from the back),
// so the hot user agents of a set are found at the first compare. The
// table holds no pointers, so the garbage collector never scans it.
//
// The fingerprint and the set index together are 62 bits of a 64-bit hash
// under a random per-process seed, not the user agent itself: two distinct
// user agents sharing both is a 2^-62 event per pair that no client can
// provoke without the seed, and would only mislabel a browser.
//
// A uaCache is used by one goroutine.
type uaCache struct {
	seed  maphash.Seed
	sets  []uaSet // slices of a page-aligned allocation, so each set is one line
	mask  uint64
	infos []uaInfo          // distinct answers; index 0 is unused
	index map[uaInfo]uint16 // infos' indices
}

type uaSet [uaCacheWays]uint64 // slot: fingerprint<<16 | answer index; 0 is empty

// uaMaxInfos bounds the distinct answers (the index is 16 bits). Should
// the table ever fill, a new answer is not cached rather than the table
// growing without bound.
const uaMaxInfos = 1 << 16

func newUACache(sets int) *uaCache {
	if sets&(sets-1) != 0 || sets <= 0 || sets > 1<<16 {
		panic("BUG: uaCache sets must be a power of two up to 65,536 (the fingerprint is the hash's top 48 bits)")
	}
	return &uaCache{
		seed:  maphash.MakeSeed(),
		sets:  make([]uaSet, sets),
		mask:  uint64(sets - 1),
		infos: make([]uaInfo, 1, 64),
		index: make(map[uaInfo]uint16),
	}
}

func (c *uaCache) hash(ua []byte) uint64 { return maphash.Bytes(c.seed, ua) }

// fingerprint is the slot tag of h: its top 48 bits, never 0 (the set
// index is its low bits).
func fingerprint(h uint64) uint64 {
	if f := h >> 16; f != 0 {
		return f
	}
	return 1
}

func (c *uaCache) get(h uint64) (uaInfo, bool) {
	set := &c.sets[h&c.mask]
	f := fingerprint(h)
	for i, s := range set {
		if s>>16 != f {
			continue
		}
		if i > 0 {
			copy(set[1:i+1], set[:i])
			set[0] = s
		}
		return c.infos[uint16(s)], true
	}
	return uaInfo{}, false
}

// put stores info for h at the front of its set, dropping the least
// recently used slot when the set is full.
func (c *uaCache) put(h uint64, info uaInfo) {
	id, ok := c.index[info]
	if !ok {
		if len(c.infos) >= uaMaxInfos {
			return
		}
		id = uint16(len(c.infos))
		c.infos = append(c.infos, info)
		c.index[info] = id
	}
	set := &c.sets[h&c.mask]
	f := fingerprint(h)
	last := len(set) - 1
	for i, s := range set {
		if s>>16 == f || s == 0 {
			last = i
			break
		}
	}
	copy(set[1:last+1], set[:last])
	set[0] = f<<16 | uint64(id)
}

// len counts the cached user agents (tests).
func (c *uaCache) len() int {
	n := 0
	for i := range c.sets {
		for _, s := range c.sets[i] {
			if s != 0 {
				n++
			}
		}
	}
	return n
}
