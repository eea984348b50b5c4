package ingest

import (
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
)

const iphoneUA = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1"

// TestClassifierAgreesWithClickEvents: what the classifier tells the
// redirect rules is what the click event of the same request records,
// and a click captured with a rule records it.
func TestClassifierAgreesWithClickEvents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "city.mmdb")
	writeFile(t, path, buildMMDB(t, "GeoLite2-City", 6, cityNets))
	p := openTestPipeline(t, func(c *Config) {
		c.GeoIPPath = path
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		c.CountryHeader = "CF-IPCountry"
	})
	c := p.Classifier()
	reqs := []struct {
		peer    string
		headers map[string]string
		country string
		device  string
	}{
		{"81.169.1.1", map[string]string{"User-Agent": iphoneUA}, "DE", "mobile"},
		{"127.0.0.1", map[string]string{"X-Forwarded-For": "195.50.209.9"}, "EE", "desktop"},
		// The trusted proxy's header wins over the database, as in events.
		{"127.0.0.1", map[string]string{"X-Forwarded-For": "195.50.209.9", "CF-IPCountry": "fr"}, "FR", "desktop"},
		// An untrusted peer's headers are not believed.
		{"192.0.2.1", map[string]string{"X-Forwarded-For": "81.169.1.1", "CF-IPCountry": "FR"}, "", "desktop"},
	}
	type answer struct{ device, os, browser, country string }
	var want []answer
	for i, r := range reqs {
		ctx := clickCtx("http://wm.example/c", r.peer, r.headers)
		d, o, b, cc := c.Classify(ctx, true, true)
		country := ""
		if cc != ([2]byte{}) {
			country = string(cc[:])
		}
		if country != r.country || d != r.device {
			t.Errorf("request %d: classified %q in %q; want %q in %q", i, d, country, r.device, r.country)
		}
		want = append(want, answer{d, o, b, country})
		// Only what is asked for is looked up.
		if d2, _, _, cc2 := c.Classify(ctx, false, true); d2 != "" || cc2 != cc {
			t.Errorf("request %d, geo only: %q %v", i, d2, cc2)
		}
		if _, _, _, cc2 := c.Classify(ctx, true, false); cc2 != ([2]byte{}) {
			t.Errorf("request %d, UA only: country %v", i, cc2)
		}
		p.CaptureRuleClick(ctx, []byte("c"), uint8(i))
	}
	events := closeAndRead(t, p)
	if len(events) != len(reqs) {
		t.Fatalf("got %d events; want %d", len(events), len(reqs))
	}
	for i, ev := range events {
		got := answer{ev.Device, ev.OS, ev.Browser, ev.Country}
		if got != want[i] {
			t.Errorf("event %d records %+v; the classifier said %+v", i, got, want[i])
		}
		if ev.Flags&FlagRules == 0 || ev.Rule != uint8(i) {
			t.Errorf("event %d: flags %b rule %d; want the rules flag and rule %d", i, ev.Flags, ev.Rule, i)
		}
	}
	if want[0].os != "iOS" || want[0].browser != "Safari" {
		t.Errorf("iPhone classified as %+v", want[0])
	}
}

func TestClassifierConcurrent(t *testing.T) {
	p := openTestPipeline(t, nil)
	c := p.Classifier()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				ctx := clickCtx("http://wm.example/c", "192.0.2.1", map[string]string{"User-Agent": iphoneUA})
				if d, _, _, _ := c.Classify(ctx, true, true); d != "mobile" {
					t.Errorf("device %q", d)
					return
				}
			}
		}()
	}
	wg.Wait()
}
