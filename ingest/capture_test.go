package ingest

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

const firefoxUA = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"

// clickCtx builds a redirect request as fasthttp would hand it over.
func clickCtx(uri, peer string, headers map[string]string) *fasthttp.RequestCtx {
	var req fasthttp.Request
	req.SetRequestURI(uri)
	req.Header.SetUserAgent(firefoxUA)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	ctx := &fasthttp.RequestCtx{}
	ip := net.ParseIP(peer)
	ctx.Init(&req, &net.TCPAddr{IP: ip, Port: 40000}, nil)
	return ctx
}

// closeAndRead closes p and returns every event it wrote.
func closeAndRead(t *testing.T, p *Pipeline) []Event {
	t.Helper()
	if err := p.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return readSealed(t, p.cfg.Dir)
}

func TestCaptureClick(t *testing.T) {
	p := openTestPipeline(t, nil)
	ctx := clickCtx("http://wm.example/aB3dE7x?utm_source=news&utm_medium=email&utm_campaign=fall&secret=1",
		"203.0.113.7", map[string]string{"Referer": "https://user:pw@WWW.News.Example.com:8443/story/1?token=hunter2#frag"})
	p.CaptureClick(ctx, []byte("aB3dE7x"))
	events := closeAndRead(t, p)
	if len(events) != 1 {
		t.Fatalf("got %d events; want 1", len(events))
	}
	ev := events[0]
	want := map[string][2]string{
		"code":     {ev.Code, "aB3dE7x"},
		"referrer": {ev.ReferrerHost, "news.example.com"},
		"source":   {ev.UTMSource, "news"},
		"medium":   {ev.UTMMedium, "email"},
		"campaign": {ev.UTMCampaign, "fall"},
		"node":     {ev.Node, "node-a"},
		"region":   {ev.Region, "eu"},
		"browser":  {ev.Browser, "Firefox"},
		"os":       {ev.OS, "Linux"},
		"device":   {ev.Device, "desktop"},
		"country":  {ev.Country, ""},
	}
	for field, gw := range want {
		if gw[0] != gw[1] {
			t.Errorf("%s: got %q; want %q", field, gw[0], gw[1])
		}
	}
	if ev.Kind != KindClick || ev.Bot() || ev.VisitorHash == 0 || ev.ID == ([16]byte{}) {
		t.Errorf("got kind %v bot %v hash %x id %x; want a non-bot click with hash and id", ev.Kind, ev.Bot(), ev.VisitorHash, ev.ID)
	}
	assertNoSecrets(t, p.cfg.Dir, netip.MustParseAddr("203.0.113.7"), "hunter2", "/story", "secret", "user:pw")
}

// assertNoSecrets checks the raw bytes of every segment for things that must
// never be stored.
func assertNoSecrets(t *testing.T, dir string, ip netip.Addr, secrets ...string) {
	t.Helper()
	for _, f := range sealedFiles(t, dir) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if ip.IsValid() {
			raw4 := ip.As4()
			if bytes.Contains(b, []byte(ip.String())) || bytes.Contains(b, raw4[:]) {
				t.Errorf("segment holds the client IP %s", ip)
			}
		}
		for _, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("segment holds %q", s)
			}
		}
	}
}

func TestCaptureClickTrustedProxy(t *testing.T) {
	p := openTestPipeline(t, func(c *Config) {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		c.CountryHeader = "CF-IPCountry"
	})
	hdr := func(xff, country string) map[string]string {
		return map[string]string{"X-Forwarded-For": xff, "CF-IPCountry": country}
	}
	// Through the trusted proxy: country believed, client from XFF.
	p.CaptureClick(clickCtx("http://wm.example/c", "127.0.0.1", hdr("1.1.1.1, 198.51.100.9, 127.0.0.2", "de")), []byte("c"))
	// Same client via the proxy, spoofed leftmost entry: same visitor.
	p.CaptureClick(clickCtx("http://wm.example/c", "127.0.0.1", hdr("9.9.9.9, 198.51.100.9", "DE")), []byte("c"))
	// Untrusted peer: headers ignored.
	p.CaptureClick(clickCtx("http://wm.example/c", "198.51.100.77", hdr("198.51.100.9", "FR")), []byte("c"))
	// Unknown country.
	p.CaptureClick(clickCtx("http://wm.example/c", "127.0.0.1", hdr("198.51.100.9", "XX")), []byte("c"))
	events := closeAndRead(t, p)
	if len(events) != 4 {
		t.Fatalf("got %d events; want 4", len(events))
	}
	if events[0].Country != "DE" || events[1].Country != "DE" || events[2].Country != "" || events[3].Country != "" {
		t.Errorf("got countries %q %q %q %q; want DE DE '' ''", events[0].Country, events[1].Country, events[2].Country, events[3].Country)
	}
	if events[0].VisitorHash != events[1].VisitorHash || events[0].VisitorHash != events[3].VisitorHash {
		t.Errorf("same client through the proxy got different visitor hashes")
	}
	if events[2].VisitorHash == events[0].VisitorHash {
		t.Errorf("an untrusted peer's XFF was believed")
	}
}

func TestCaptureClickBots(t *testing.T) {
	p := openTestPipeline(t, nil)
	for _, ua := range []string{
		"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
		"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/120.0.0.0 Safari/537.36",
		"curl/8.5.0",
		"",
	} {
		ctx := clickCtx("http://wm.example/c", "203.0.113.7", nil)
		ctx.Request.Header.SetUserAgent(ua)
		p.CaptureClick(ctx, []byte("c"))
	}
	for i, ev := range closeAndRead(t, p) {
		if !ev.Bot() {
			t.Errorf("event %d (%s): got bot flag false; want true", i, ev.Browser)
		}
	}
}

func TestRotationByAge(t *testing.T) {
	clock := newFakeClock()
	p := openTestPipeline(t, func(c *Config) {
		c.Now = clock.Now
		c.SegmentMaxAge = time.Minute
		c.SyncInterval = 5 * time.Millisecond
	})
	p.CaptureClick(clickCtx("http://wm.example/c", "203.0.113.7", nil), []byte("c"))
	waitFor(t, "the event to be written", func() bool { return p.m.written.Get() == 1 })
	if n := len(sealedFiles(t, p.cfg.Dir)); n != 0 {
		t.Fatalf("got %d sealed segments before the age bound; want 0", n)
	}
	clock.Advance(30 * time.Second)
	if age := p.OldestPendingAge(); age != 30*time.Second {
		t.Errorf("got oldest pending age %v; want 30s (the open segment)", age)
	}
	clock.Advance(30 * time.Second)
	waitFor(t, "the segment to seal by age", func() bool { return len(sealedFiles(t, p.cfg.Dir)) == 1 })
	waitFor(t, "the oldest-pending gauge", func() bool { return p.OldestPendingAge() == time.Minute })
}

// TestDiskCapDrops fills the byte cap with no aggregator: CaptureClick
// keeps returning, and every event is either written or counted dropped.
func TestDiskCapDrops(t *testing.T) {
	const capBytes = 4096
	p := openTestPipeline(t, func(c *Config) {
		c.MaxPendingBytes = capBytes
		c.SegmentMaxBytes = 1024
		c.QueueSize = 16
	})
	const n = 300
	ctx := clickCtx("http://wm.example/c", "203.0.113.7", nil)
	for i := range n {
		p.CaptureClick(ctx, []byte("c")) // must not block, whatever the disk
		if i%8 == 0 {
			// Let the writer keep up, so the cap (not the queue) is what drops.
			waitFor(t, "the queue to drain", func() bool { return p.queue.Len() == 0 })
		}
	}
	accounted := func() uint64 {
		return p.m.written.Get() + p.Dropped(DropDiskCap) + p.Dropped(DropQueueFull)
	}
	waitFor(t, "every event written or dropped", func() bool { return accounted() == n })
	if p.Dropped(DropDiskCap) == 0 {
		t.Errorf("got no disk_cap drops (written %d, queue_full %d); want some", p.m.written.Get(), p.Dropped(DropQueueFull))
	}
	if got := p.PendingBytes(); got > capBytes {
		t.Errorf("got %d pending bytes; want <= %d", got, capBytes)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := uint64(len(readSealed(t, p.cfg.Dir))); got != p.m.written.Get() {
		t.Errorf("got %d events on disk; want the %d written", got, p.m.written.Get())
	}
}

func TestCaptureAfterCloseIsDropped(t *testing.T) {
	p := openTestPipeline(t, nil)
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.CaptureClick(clickCtx("http://wm.example/c", "203.0.113.7", nil), []byte("c"))
	if p.Dropped(DropClosed) != 1 {
		t.Fatalf("got %d closed drops; want 1", p.Dropped(DropClosed))
	}
}

func TestReopenKeepsUnshippedSegments(t *testing.T) {
	dir := t.TempDir()
	p := openTestPipeline(t, func(c *Config) { c.Dir = dir })
	for range 10 {
		p.CaptureClick(clickCtx("http://wm.example/c", "203.0.113.7", nil), []byte("c"))
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	p2 := openTestPipeline(t, func(c *Config) { c.Dir = dir })
	if p2.PendingBytes() == 0 {
		t.Fatalf("got 0 pending bytes after reopen; want the unshipped segment")
	}
	if got := len(readSealed(t, dir)); got != 10 {
		t.Fatalf("got %d events; want 10", got)
	}
}

func BenchmarkCaptureClick(b *testing.B) {
	p := openTestPipeline(b, func(c *Config) { c.SyncInterval = 200 * time.Millisecond })
	ctx := clickCtx("http://wm.example/aB3dE7x?utm_source=news", "203.0.113.7",
		map[string]string{"Referer": "https://news.example.com/story"})
	code := []byte("aB3dE7x")
	for range 1000 { // warm the pool and the user-agent cache
		p.CaptureClick(ctx, code)
	}
	b.ReportAllocs()
	for b.Loop() {
		p.CaptureClick(ctx, code)
	}
}

// TestCaptureClickUTM: the writer reads the UTM values from the query
// string as net/url's ParseQuery would (first value wins, '+' is a space,
// pairs with a ';' or a bad escape are skipped), the same rules as for
// /api/event page URLs.
func TestCaptureClickUTM(t *testing.T) {
	p := openTestPipeline(t, nil)
	p.CaptureClick(clickCtx("http://wm.example/c?utm_term=a+b%20c&utm_term=second&utm_content=x;y&utm_content=ok&utm_medium=%zz&utm_medium=m&utm_source=s&other=1",
		"203.0.113.7", nil), []byte("c"))
	events := closeAndRead(t, p)
	if len(events) != 1 {
		t.Fatalf("got %d events; want 1", len(events))
	}
	ev := events[0]
	if ev.UTMTerm != "a b c" || ev.UTMContent != "ok" || ev.UTMMedium != "m" || ev.UTMSource != "s" || ev.UTMCampaign != "" {
		t.Errorf("got source %q medium %q campaign %q term %q content %q; want s m '' \"a b c\" ok",
			ev.UTMSource, ev.UTMMedium, ev.UTMCampaign, ev.UTMTerm, ev.UTMContent)
	}
}
