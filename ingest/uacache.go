package ingest

import (
	"hash/maphash"
	"math"
)

// uaCacheSets and uaCacheWays size the user-agent cache: 16,384 sets of
// 8 entries, 131,072 user agents in about 3 MiB. A day of real traffic has
// thousands to tens of thousands of distinct user agents; the cache must
// hold that working set, or every event pays a parse and a crawler check.
const (
	uaCacheSets = 1 << 14
	uaCacheWays = assocWays
)

// uaCache remembers what user agents told us (a setAssoc, so its memory is
// fixed and holds no pointers: the strings are interned in one table).
//
// An entry is keyed by a 64-bit hash of the user agent under a random
// per-process seed, not by the user agent itself: two distinct user agents
// in one set sharing a hash is a 2^-64 event per pair that no client can
// provoke without the seed, and would only mislabel a browser.
//
// A uaCache is used by one goroutine.
type uaCache struct {
	seed    maphash.Seed
	entries setAssoc[uaEntry]
	strings internTable // browser, OS, device names and versions
}

type uaEntry struct {
	browser, browserVersion, os, osVersion, device uint16
	bot                                            bool
}

func newUACache(sets int) *uaCache {
	return &uaCache{
		seed:    maphash.MakeSeed(),
		entries: newSetAssoc[uaEntry](sets),
		strings: newInternTable(math.MaxUint16 + 1),
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
	e, ok := c.entries.get(h)
	if !ok {
		return uaInfo{}, false
	}
	return uaInfo{browser: c.str(e.browser), browserVersion: c.str(e.browserVersion),
		os: c.str(e.os), osVersion: c.str(e.osVersion), device: c.str(e.device), bot: e.bot}, true
}

func (c *uaCache) str(i uint16) string { return c.strings.str(uint32(i)) }

// put stores info for h. The parser knows a few dozen names and real
// traffic a few thousand versions; should the string table ever fill, the
// entry is not cached rather than the table growing without bound.
func (c *uaCache) put(h uint64, info uaInfo) {
	var ids [5]uint16
	for i, s := range [5]string{info.browser, info.browserVersion, info.os, info.osVersion, info.device} {
		id, ok := c.strings.id(s)
		if !ok {
			return
		}
		ids[i] = uint16(id)
	}
	c.entries.put(h, uaEntry{browser: ids[0], browserVersion: ids[1], os: ids[2], osVersion: ids[3], device: ids[4], bot: info.bot})
}

// len counts the cached user agents (tests).
func (c *uaCache) len() int { return c.entries.len() }
