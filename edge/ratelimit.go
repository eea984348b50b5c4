package edge

import (
	"math"
	"sync"
	"time"
)

// limiterMaxKeys bounds the bucket map; past it, full buckets are dropped
// (a full bucket is the same as no bucket).
const limiterMaxKeys = 100000

// limiter is a token bucket per key: per API key for writes, per client
// address for lookups at the leader.
type limiter[K comparable] struct {
	rate, burst float64
	now         func() time.Time

	mu      sync.Mutex
	buckets map[K]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newLimiter[K comparable](rate, burst float64, now func() time.Time) *limiter[K] {
	return &limiter[K]{rate: rate, burst: burst, now: now, buckets: make(map[K]*bucket)}
}

// allow takes one token for key, or says how long until one is available.
func (l *limiter[K]) allow(key K) (bool, time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= limiterMaxKeys {
			l.dropFull(now)
		}
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[key] = b
	}
	l.refill(b, now)
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration(math.Ceil((1 - b.tokens) / l.rate * float64(time.Second)))
	return false, wait
}

func (l *limiter[K]) refill(b *bucket, now time.Time) {
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = min(l.burst, b.tokens+elapsed.Seconds()*l.rate)
		b.last = now
	}
}

func (l *limiter[K]) dropFull(now time.Time) {
	for k, b := range l.buckets {
		l.refill(b, now)
		if b.tokens >= l.burst {
			delete(l.buckets, k)
		}
	}
}

// refund gives back a token allow took, for work that then did not
// happen (a create that was not made).
func (l *limiter[K]) refund(key K) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b := l.buckets[key]; b != nil {
		b.tokens = min(l.burst, b.tokens+1)
	}
}
