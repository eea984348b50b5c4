package ingest

import (
	"net/netip"
	"testing"
	"time"
	"unsafe"
)

func TestIPRateLimit(t *testing.T) {
	r := newRateLimits(1000, 2000, 1, 3) // 1/s, burst 3
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	a, b := netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("2001:db8::1")
	for i := range 3 {
		if !r.allowIP(a, now) || !r.allowIP(b, now) {
			t.Fatalf("request %d within the burst was refused", i+1)
		}
	}
	if r.allowIP(a, now) || r.allowIP(b, now) {
		t.Fatal("a fourth request in the same instant was allowed; want the burst of 3 to hold")
	}
	if !r.allowIP(a, now.Add(time.Second)) {
		t.Error("after 1 s at 1/s: refused; want one token back")
	}
	if r.allowIP(a, now.Add(time.Second)) {
		t.Error("after 1 s at 1/s: a second request allowed; want only one token back")
	}
}

// TestIPRateLimitTableIsBounded: a flood of distinct addresses never grows
// the table, and an address pushed out comes back with a full burst (more
// lenient, never stricter).
func TestIPRateLimitTableIsBounded(t *testing.T) {
	r := newRateLimits(1000, 2000, 0.001, 1)
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	first := netip.MustParseAddr("10.0.0.1")
	if !r.allowIP(first, now) || r.allowIP(first, now) {
		t.Fatal("burst of 1 not enforced")
	}
	for i := range 200_000 {
		r.allowIP(netip.AddrFrom4([4]byte{11, byte(i >> 16), byte(i >> 8), byte(i)}), now.Add(time.Duration(i+1)))
	}
	if !r.allowIP(first, now.Add(time.Millisecond)) { // far too soon for a refill at 0.001/s
		t.Errorf("an address evicted by the flood was refused; want a fresh bucket")
	}
}

// TestIPBucketSetsAreCacheLines: a set of IP buckets is one 64-byte line
// and every set starts on one, so a lookup touches a single line.
func TestIPBucketSetsAreCacheLines(t *testing.T) {
	r := newRateLimits(1, 1, 1, 1)
	if size := unsafe.Sizeof(r.ips[0].sets[0]); size != 64 {
		t.Errorf("a set is %d bytes; want 64", size)
	}
	for i := range r.ips {
		if a := uintptr(unsafe.Pointer(&r.ips[i].sets[0])); a%64 != 0 {
			t.Errorf("shard %d: sets start at %#x, not on a 64-byte line", i, a)
		}
	}
}

// BenchmarkAllowIP takes tokens for 60,000 distinct clients in a
// scattered order, as /api/event does under load from many visitors.
func BenchmarkAllowIP(b *testing.B) {
	r := newRateLimits(1e12, 1e12, 1e12, 1e12)
	const clients = 60_000
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	i := uint32(0)
	b.ReportAllocs()
	for b.Loop() {
		i = (i + 7919) % clients
		r.allowIP(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), now)
	}
}
