package ingest

import (
	"hash/maphash"
	"net/netip"
	"sync"
	"time"
)

// The per-IP table: limitShards locks, each over ipSets sets of ipWays
// buckets, 65,536 buckets in about 1.5 MiB that the garbage collector
// never scans. A client that finds no bucket of its own takes the set's
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
	siteRate, siteBurst float64
	ipRate, ipBurst     float64
	seed                maphash.Seed
	sites               [limitShards]siteShard
	ips                 [limitShards]ipShard
}

type siteShard struct {
	mu      sync.Mutex
	buckets map[string]*tokenBucket
}

type ipShard struct {
	mu   sync.Mutex
	sets [ipSets][ipWays]ipBucket
}

type ipBucket struct {
	key uint64 // 0: free
	tokenBucket
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
	if h == 0 {
		h = 1
	}
	sh := &r.ips[h%limitShards]
	set := &sh.sets[(h/limitShards)%ipSets]
	ns := now.UnixNano()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	victim := 0
	for i := range set {
		if set[i].key == h {
			return set[i].allow(ns, r.ipRate, r.ipBurst)
		}
		if set[i].key == 0 || set[victim].key != 0 && set[i].last < set[victim].last {
			victim = i
		}
	}
	set[victim] = ipBucket{key: h}
	return set[victim].allow(ns, r.ipRate, r.ipBurst)
}
