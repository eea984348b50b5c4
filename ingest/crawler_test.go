package ingest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/x-way/crawlerdetect"
)

// Common crawlers, fetchers and tools, by their published user agents.
var knownCrawlers = []string{
	"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
	"Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.6099.216 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
	"Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
	"Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)",
	"DuckDuckBot/1.1; (+http://duckduckgo.com/duckduckbot.html)",
	"Mozilla/5.0 (compatible; Baiduspider/2.0; +http://www.baidu.com/search/spider.html)",
	"facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
	"Twitterbot/1.0",
	"Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
	"Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)",
	"LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient +http://www.linkedin.com)",
	"TelegramBot (like TwitterBot)",
	"Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)",
	"Mozilla/5.0 (compatible; SemrushBot/7~bl; +http://www.semrush.com/bot.html)",
	"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.0; +https://openai.com/gptbot)",
	"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/13.1.1 Safari/605.1.15 (Applebot/0.1; +http://www.apple.com/go/applebot)",
	"Mozilla/5.0 (Linux; Android 7.0;) AppleWebKit/537.36 (KHTML, like Gecko) Mobile Safari/537.36 (compatible; PetalBot;+https://webmaster.petalsearch.com/site/petalbot)",
	"curl/8.5.0",
	"Wget/1.21.4",
	"python-requests/2.31.0",
	"Go-http-client/1.1",
	"axios/1.6.2",
	"okhttp/4.12.0",
	"Java/17.0.9",
	"Mozilla/5.0 (compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)",
}

// Current browsers on the major platforms.
var knownBrowsers = []string{
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36",
	"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36",
	"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36",
	"Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.6099.144 Mobile Safari/537.36",
	"Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1",
	"Mozilla/5.0 (iPad; CPU OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1",
	"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Safari/605.1.15",
	firefoxUA,
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:121.0) Gecko/20100101 Firefox/121.0",
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36 Edg/120.0.0.0",
	"Mozilla/5.0 (Linux; Android 13; SAMSUNG SM-A546B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/23.0 Chrome/115.0.0.0 Mobile Safari/537.36",
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/119.0.0.0 Safari/537.36 OPR/105.0.0.0",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/120.0.6099.119 Mobile/15E148 Safari/604.1",
}

func TestCrawlerMatcherIsActive(t *testing.T) {
	if defaultCrawlers == nil {
		t.Fatal("crawlerdetect's pattern lists could not be read or modelled; every miss of the UA cache takes the library's slow path")
	}
}

func TestCrawlerMatcherKnownAgents(t *testing.T) {
	var s crawlerScratch
	for _, ua := range knownCrawlers {
		if !defaultCrawlers.isCrawler(ua, &s) {
			t.Errorf("isCrawler(%q): got false; want true", ua)
		}
	}
	for _, ua := range knownBrowsers {
		if defaultCrawlers.isCrawler(ua, &s) {
			t.Errorf("isCrawler(%q): got true; want false", ua)
		}
	}
}

// TestCrawlerMatcherAgreesWithLibrary checks the fast matcher against the
// library on the library's own test corpus (every crawler, a sample of the
// 165,000 browser user agents).
func TestCrawlerMatcherAgreesWithLibrary(t *testing.T) {
	dir := crawlerdetectDir(t)
	var s crawlerScratch
	for _, tc := range []struct {
		file  string
		every int
	}{{"crawlers.txt", 1}, {"devices.txt", 25}} {
		if raceEnabled {
			tc.every *= 10 // the library is slow under the race detector
		}
		f, err := os.Open(filepath.Join(dir, "testdata", tc.file))
		if err != nil {
			t.Skipf("no crawlerdetect test corpus: %v", err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		checked := 0
		for line := 0; sc.Scan(); line++ {
			if line%tc.every != 0 {
				continue
			}
			ua := sc.Text()
			checked++
			if got, want := defaultCrawlers.isCrawler(ua, &s), crawlerdetect.IsCrawler(ua); got != want {
				t.Errorf("%s: isCrawler(%q): got %v; the library says %v", tc.file, ua, got, want)
			}
		}
		f.Close()
		if checked < 300 {
			t.Errorf("%s: checked only %d user agents", tc.file, checked)
		}
	}
}

// crawlerdetectDir finds the library's module folder (with its testdata).
func crawlerdetectDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/x-way/crawlerdetect").Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Skipf("cannot locate the crawlerdetect module: %v", err)
	}
	return dir
}

func FuzzCrawlerMatcher(f *testing.F) {
	for _, ua := range append(append([]string{"", " ", "bot", "\u212aHTML", "Mozilla/5.0 Safari/1.2bot"}, knownCrawlers...), knownBrowsers...) {
		f.Add(ua)
	}
	f.Fuzz(func(t *testing.T, ua string) {
		var s crawlerScratch
		if got, want := defaultCrawlers.isCrawler(ua, &s), crawlerdetect.IsCrawler(ua); got != want {
			t.Fatalf("isCrawler(%q): got %v; the library says %v", ua, got, want)
		}
	})
}

func BenchmarkCrawlerMatcher(b *testing.B) {
	uas := distinctUAs(20000)
	var s crawlerScratch
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		defaultCrawlers.isCrawler(string(uas[i%len(uas)]), &s)
		i++
	}
}

// BenchmarkCrawlerLibrary is the library on the same input, for the ratio.
func BenchmarkCrawlerLibrary(b *testing.B) {
	uas := distinctUAs(20000)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		crawlerdetect.IsCrawler(string(uas[i%len(uas)]))
		i++
	}
}
