package ingest

import (
	"hash/maphash"
	"net/netip"
	"sync"
	"time"
	"unsafe"
)

// The per-IP table: limitShards locks, each over ipSets sets of ipWays
// buckets, 65,536 buckets in 1 MiB that the garbage collector never
// scans. A set is one 64-byte cache line (a bucket is 16 bytes), so a
// request from a client not seen for a while costs one cache miss, not
// two or three. A client that finds no bucket of its own takes the set's
// least recently refilled one, which has refilled the longest and is the
// cheapest to forget: forgetting a bucket only ever makes the limit more
// lenient for one client, never stricter.
const (
	limitShards = 16
	ipSets      = 1024
	ipWays      = 4
)

// tokenBucket holds up to burst tokens, refilled at rate per second.
type tokenBucket struct {
	tokens float64
	last   int64 // Unix ns of the last refill
}

func (b *tokenBucket) allow(now int64, rate, burst float64) bool {
	if b.last == 0 {
		b.tokens = burst
	} else if now > b.last {
		b.tokens = min(burst, b.tokens+float64(now-b.last)/1e9*rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// rateLimits are the token buckets of /api/event: one per site and one per
// client IP. IPs are keyed by a hash under a random per-process seed, so
// the table holds no address.
type rateLimits struct {
	// ips comes first: the struct is one large, page-aligned allocation,
	// so every set starts on a cache line.
	ips                 [limitShards]ipShard
	siteRate, siteBurst float64
	ipRate, ipBurst     float64
	seed                maphash.Seed
	sites               [limitShards]siteShard
}

type siteShard struct {
	mu      sync.Mutex
	buckets map[string]*tokenBucket
}

type ipShard struct {
	sets [ipSets][ipWays]ipBucket
	mu   sync.Mutex
	_    [64 - unsafe.Sizeof(sync.Mutex{})]byte // keeps the next shard's sets on cache lines
}

// ipBucket is a token bucket in 16 bytes. key is 32 bits of the address's
// hash; with the 14 bits that chose the shard and set, two clients share a
// bucket only when 46 bits of their keyed hashes agree (2^-46 per pair,
// and no client can aim for it without the seed).
type ipBucket struct {
	key    uint32 // 0: free
	tokens float32
	last   int64 // Unix ns of the last refill
}

func (b *ipBucket) allow(now int64, rate, burst float64) bool {
	t := tokenBucket{tokens: float64(b.tokens), last: b.last}
	ok := t.allow(now, rate, burst)
	b.tokens, b.last = float32(t.tokens), t.last
	return ok
}

func newRateLimits(siteRate, siteBurst, ipRate, ipBurst float64) *rateLimits {
	r := &rateLimits{
		siteRate: siteRate, siteBurst: siteBurst, ipRate: ipRate, ipBurst: ipBurst,
		seed: maphash.MakeSeed(),
	}
	for i := range limitShards {
		r.sites[i].buckets = map[string]*tokenBucket{}
	}
	return r
}

// allowSite takes a token from the site's bucket. Sites are few and
// registered, so their table needs no bound.
func (r *rateLimits) allowSite(siteID string, now time.Time) bool {
	sh := &r.sites[maphash.String(r.seed, siteID)%limitShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b := sh.buckets[siteID]
	if b == nil {
		b = &tokenBucket{}
		sh.buckets[siteID] = b
	}
	return b.allow(now.UnixNano(), r.siteRate, r.siteBurst)
}

// allowIP takes a token from the client's bucket.
func (r *rateLimits) allowIP(ip netip.Addr, now time.Time) bool {
	h := maphash.Comparable(r.seed, ip.As16())
	key := uint32(h >> 32)
	if key == 0 {
		key = 1
	}
	sh := &r.ips[h%limitShards]
	set := &sh.sets[(h/limitShards)%ipSets]
	ns := now.UnixNano()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	victim := 0
	for i := range set {
		if set[i].key == key {
			return set[i].allow(ns, r.ipRate, r.ipBurst)
		}
		if set[i].key == 0 || set[victim].key != 0 && set[i].last < set[victim].last {
			victim = i
		}
	}
	set[victim] = ipBucket{key: key}
	return set[victim].allow(ns, r.ipRate, r.ipBurst)
}
