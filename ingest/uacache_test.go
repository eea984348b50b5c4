package ingest

import (
	"fmt"
	"testing"
)

// distinctUAs makes n distinct, realistic browser user agents.
func distinctUAs(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/%d.0.%d.%d Safari/537.36", 100+i%40, i, (i*7)%1000)
	}
	return out
}

func TestUACacheHoldsWorkingSet(t *testing.T) {
	for _, tc := range []struct {
		n       int
		minHits float64
	}{{20_000, 0.999}, {65_536, 0.99}} {
		c := newUACache(uaCacheSets)
		uas := distinctUAs(tc.n)
		for i, ua := range uas {
			c.put(c.hash(ua), uaInfo{browser: "Chrome", os: "Windows", device: "desktop", bot: i%2 == 0})
		}
		hits := 0
		for i, ua := range uas {
			info, ok := c.get(c.hash(ua))
			if !ok {
				continue
			}
			hits++
			if info != (uaInfo{browser: "Chrome", os: "Windows", device: "desktop", bot: i%2 == 0}) {
				t.Fatalf("entry %d: got %+v", i, info)
			}
		}
		if got := float64(hits) / float64(tc.n); got < tc.minHits {
			t.Errorf("%d distinct user agents: %.4f still cached; want >= %.3f", tc.n, got, tc.minHits)
		}
	}
}

func TestUACacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := newUACache(4)
	key := func(i int) uint64 { return uint64(i+1)<<32 | 1 } // all in set 1, distinct fingerprints
	for i := range uaCacheWays {
		c.put(key(i), uaInfo{browser: fmt.Sprint(i)})
	}
	c.get(key(0)) // 0 is now the most recent; 1 the least
	c.put(key(100), uaInfo{browser: "new"})
	if _, ok := c.get(key(1)); ok {
		t.Errorf("the least recently used entry survived")
	}
	for _, i := range []int{0, 2, 7, 100} {
		if _, ok := c.get(key(i)); !ok {
			t.Errorf("entry %d was evicted; want only the least recently used gone", i)
		}
	}
}

func TestUACacheIsBounded(t *testing.T) {
	c := newUACache(64)
	for i := range 100_000 {
		c.put(uint64(i+1)*0x9e3779b97f4a7c15, uaInfo{browser: "b"})
	}
	if n := c.len(); n != 64*uaCacheWays {
		t.Errorf("got %d entries; want exactly the capacity %d", n, 64*uaCacheWays)
	}
	if len(c.infos) != 2 {
		t.Errorf("got %d distinct answers; want 2 (the unused 0 and one)", len(c.infos))
	}
}

func TestEnricherCachesUserAgents(t *testing.T) {
	e, err := newEnricher("")
	if err != nil {
		t.Fatal(err)
	}
	ua := []byte(knownBrowsers[3])
	first := e.userAgent(ua)
	if first.browser != "Chrome" || first.os != "Android" || first.device != "mobile" || first.bot {
		t.Fatalf("got %+v; want Chrome on Android, mobile, not a bot", first)
	}
	if again := e.userAgent(ua); again != first || e.cache.len() != 1 {
		t.Errorf("second lookup: got %+v with %d cached; want the same answer from one entry", again, e.cache.len())
	}
	if bot := e.userAgent([]byte(knownCrawlers[0])); !bot.bot {
		t.Errorf("Googlebot: got %+v; want a bot", bot)
	}
	if empty := e.userAgent(nil); !empty.bot {
		t.Errorf("empty user agent: got %+v; want a bot", empty)
	}
}

// TestMajorMinor: Plausible's rule, String.split(".") |> Enum.take(2) |>
// Enum.join(".").
func TestMajorMinor(t *testing.T) {
	for in, want := range map[string]string{
		"88.0.4324.146": "88.0", "120.0": "120.0", "17": "17", "": "",
		"88.": "88.", "1.2.": "1.2", "10.15.7b": "10.15",
	} {
		if got := majorMinor(in); got != want {
			t.Errorf("majorMinor(%q) = %q; want %q", in, got, want)
		}
	}
}

// TestBrowserVersions: each user agent's browser version, worked out from
// the string by that rule (Safari's from its Version/ token), the same from
// the cache as from the parser. The parser reads no OS version.
func TestBrowserVersions(t *testing.T) {
	want := map[string][2]string{
		knownBrowsers[3]:  {"Chrome", "120.0"},         // Chrome/120.0.6099.144
		knownBrowsers[5]:  {"Safari", "17.1"},          // Version/17.1 Mobile Safari
		knownBrowsers[9]:  {"Firefox", "121.0"},        // Firefox/121.0
		knownBrowsers[11]: {"Samsung Browser", "23.0"}, // SamsungBrowser/23.0
		knownBrowsers[12]: {"Opera", "105.0"},          // OPR/105.0.0.0
		knownBrowsers[13]: {"Chrome", "120.0"},         // CriOS/120.0.6099.119
		"curl/8.5.0":      {"", ""},                    // no browser, no version
	}
	e, err := newEnricher("")
	if err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		for ua, w := range want {
			info := e.userAgent([]byte(ua))
			if info.browser != w[0] || info.browserVersion != w[1] || info.osVersion != "" {
				t.Errorf("round %d, %q: got browser %q %q, OS version %q; want %q %q and none",
					round, ua, info.browser, info.browserVersion, info.osVersion, w[0], w[1])
			}
		}
	}
}
