package ingest

import (
	"net/netip"
	"testing"
	"time"
)

func TestCanonicalHeaderKey(t *testing.T) {
	for _, tt := range []struct{ name, want string }{
		{"CF-IPCountry", "Cf-Ipcountry"},
		{"x-country", "X-Country"},
		{"X-Forwarded-For", "X-Forwarded-For"},
	} {
		if got := string(canonicalHeaderKey(tt.name)); got != tt.want {
			t.Errorf("canonicalHeaderKey(%q): got %q; want %q", tt.name, got, tt.want)
		}
	}
}

func TestNextLinger(t *testing.T) {
	p := &Pipeline{queue: newEventQueue(256)} // a quarter is 64
	for _, tt := range []struct {
		last time.Duration
		n    int
		want time.Duration
	}{
		{flushInterval, 0, 0},                           // nothing came: block on the queue
		{flushInterval, 10, flushInterval},              // slow: keep the interval
		{flushInterval, 128, flushInterval / 2},         // a quarter would be passed: shorten
		{flushInterval / 4, 10, flushInterval / 2},      // slow again: grow back twofold at most
		{100 * time.Microsecond, 256, 0},                // too fast to wait: block on the queue
		{time.Millisecond, 64, time.Millisecond},        // exactly a quarter: keep
		{flushInterval, 1 << 20, 0},                     // a flood
		{minLinger, 1, min(flushInterval, 2*minLinger)}, // from the shortest wait
	} {
		if got := p.nextLinger(tt.last, tt.n); got != tt.want {
			t.Errorf("nextLinger(%v, %d): got %v; want %v", tt.last, tt.n, got, tt.want)
		}
	}
}

// BenchmarkCaptureInto is what a redirect pays for click capture on the
// serving goroutine: copying the click out of the request (the queue send
// and the writer are left out).
func BenchmarkCaptureInto(b *testing.B) {
	p, err := newPipeline(Config{Dir: b.TempDir(), NodeID: "n", TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	if err != nil {
		b.Fatal(err)
	}
	defer p.enrich.close()
	ctx := clickCtx("http://wm.example/aB3dE7x?utm_source=news&utm_medium=email&utm_campaign=fall", "127.0.0.1",
		map[string]string{"Referer": "https://news.example.com/story/1", "X-Forwarded-For": "198.51.100.7"})
	code := []byte("aB3dE7x")
	b.ReportAllocs()
	for b.Loop() {
		pe := p.pool.Get().(*pending)
		p.captureInto(pe, ctx, code)
		p.release(pe)
	}
}
