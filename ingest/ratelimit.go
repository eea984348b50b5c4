package ingest

import (
	"crypto/rand"
	"encoding/binary"
	"net/netip"
	"sync"
	"time"
)

const (
	limitShards = 16
	// maxIPBuckets bounds each shard of the per-IP table; past it idle
	// buckets are swept, and if that is not enough the shard is cleared
	// (which only ever makes the limit more lenient).
	maxIPBuckets = 4096
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
// client IP. IPs are keyed by a keyed hash, so the table holds no address.
type rateLimits struct {
	siteRate, siteBurst float64
	ipRate, ipBurst     float64
	k0, k1              uint64
	sites               [limitShards]bucketShard[string]
	ips                 [limitShards]bucketShard[uint64]
}

type bucketShard[K comparable] struct {
	mu      sync.Mutex
	buckets map[K]*tokenBucket
}

func newRateLimits(siteRate, siteBurst, ipRate, ipBurst float64) *rateLimits {
	var key [16]byte
	_, _ = rand.Read(key[:])
	r := &rateLimits{
		siteRate: siteRate, siteBurst: siteBurst, ipRate: ipRate, ipBurst: ipBurst,
		k0: binary.LittleEndian.Uint64(key[:8]), k1: binary.LittleEndian.Uint64(key[8:]),
	}
	for i := range limitShards {
		r.sites[i].buckets = map[string]*tokenBucket{}
		r.ips[i].buckets = map[uint64]*tokenBucket{}
	}
	return r
}

// allowSite takes a token from the site's bucket.
func (r *rateLimits) allowSite(siteID string, now time.Time) bool {
	sh := &r.sites[sipHash24(r.k0, r.k1, []byte(siteID))%limitShards]
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
	a := ip.As16()
	h := sipHash24(r.k0, r.k1, a[:])
	sh := &r.ips[h%limitShards]
	ns := now.UnixNano()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b := sh.buckets[h]
	if b == nil {
		if len(sh.buckets) >= maxIPBuckets {
			r.sweep(sh, ns)
		}
		b = &tokenBucket{}
		sh.buckets[h] = b
	}
	return b.allow(ns, r.ipRate, r.ipBurst)
}

// sweep forgets buckets that have refilled completely: forgetting them
// changes nothing.
func (r *rateLimits) sweep(sh *bucketShard[uint64], now int64) {
	full := int64(r.ipBurst / r.ipRate * 1e9)
	for k, b := range sh.buckets {
		if now-b.last >= full {
			delete(sh.buckets, k)
		}
	}
	if len(sh.buckets) >= maxIPBuckets {
		clear(sh.buckets)
	}
}
