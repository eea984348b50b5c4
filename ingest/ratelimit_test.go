package ingest

import (
	"net/netip"
	"testing"
	"time"
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
