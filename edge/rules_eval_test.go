package edge_test

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/edge"
	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/store"
)

// Redirect rules evaluated at the edge with the real classifier (the
// ingest pipeline's user-agent parser; the country from a trusted proxy's
// header, the same lookup the click events use). Every expected answer
// below is worked out by hand from the rules and the request.

const (
	uaIPhone  = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1"
	uaAndroid = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36"
	uaWinCh   = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"
	uaWinFF   = "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:121.0) Gecko/20100101 Firefox/121.0"
	uaMacCh   = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"
	uaLinuxCh = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"
)

// campaign window of rule 5: 2030-06-01 to 2030-06-02 UTC.
var (
	windowFrom = time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)
	windowTo   = time.Date(2030, 6, 2, 0, 0, 0, 0, time.UTC)
)

func evalRules(tb testing.TB) []store.Rule {
	return []store.Rule{
		{URL: "https://a.example/ios", Devices: store.RuleDeviceIOS},
		{URL: "https://b.example/dach", Countries: []string{"DE", "AT"}},
		{URL: "https://c.example/fr", Languages: []string{"fr"}},
		{URL: "https://d.example/qr", Query: []store.RuleQuery{{Key: "ref", Values: []string{"qr", "print"}}}},
		{URL: "https://e.example/ff", OS: []string{"Windows"}, Browsers: []string{"Firefox"}},
		{URL: "https://f.example/sale", Devices: store.RuleDeviceDesktop, After: windowFrom.UnixMilli(), Before: windowTo.UnixMilli()},
	}
}

type ruleRecorder struct {
	mu    sync.Mutex
	off   bool // benchmarks: do not record (next, if set, still captures)
	rules []uint8
	next  func(*fasthttp.RequestCtx, []byte, uint8)
}

func (r *ruleRecorder) capture(ctx *fasthttp.RequestCtx, code []byte, rule uint8) {
	r.mu.Lock()
	off := r.off
	if !off {
		r.rules = append(r.rules, rule)
	}
	r.mu.Unlock()
	if r.next != nil {
		r.next(ctx, code, rule)
	}
}

func (r *ruleRecorder) take() []uint8 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.rules
	r.rules = nil
	return out
}

type ruleEnv struct {
	h     fasthttp.RequestHandler
	p     *ingest.Pipeline
	rec   *ruleRecorder
	mu    sync.Mutex
	clock time.Time
}

func (e *ruleEnv) now() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.clock
}

func (e *ruleEnv) set(t time.Time) {
	e.mu.Lock()
	e.clock = t
	e.mu.Unlock()
}

func newRuleEnv(tb testing.TB, rules []store.Rule) *ruleEnv {
	tb.Helper()
	p, err := ingest.Open(ingest.Config{
		Dir: tb.TempDir(), NodeID: "t", Region: "eu",
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		CountryHeader:  "CF-IPCountry",
		Metrics:        metrics.NewSet(),
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Close(context.Background()) })
	enc, err := store.EncodeRules(rules)
	if err != nil {
		tb.Fatal(err)
	}
	e := &ruleEnv{p: p, rec: &ruleRecorder{next: p.CaptureRuleClick}, clock: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	srv := edge.NewBenchServerWithLinks(tb, edge.Config{
		Classifier: p.Classifier(), OnRuleRedirect: e.rec.capture, OnRedirect: p.CaptureClick, Now: e.now,
	}, store.Link{Code: "rules01", URL: "https://m.example/main", Owner: "o", Rules: enc})
	e.h = srv.Handler()
	return e
}

func ruleRequest(path, ua, country, lang string) *fasthttp.RequestCtx {
	var req fasthttp.Request
	req.SetRequestURI(path)
	if ua != "" {
		req.Header.SetUserAgent(ua)
	}
	if country != "" {
		req.Header.Set("CF-IPCountry", country)
	}
	if lang != "" {
		req.Header.Set("Accept-Language", lang)
	}
	ctx := &fasthttp.RequestCtx{}
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}, nil)
	return ctx
}

func TestRedirectRulesByHand(t *testing.T) {
	e := newRuleEnv(t, evalRules(t))
	inWindow := windowFrom.Add(time.Hour)
	cases := []struct {
		name             string
		at               time.Time
		path, ua, c, lng string
		want             string
		rule             uint8
	}{
		// An iPhone in Germany speaking French: rule 0 (ios) comes first.
		{"iphone in DE", time.Time{}, "/rules01", uaIPhone, "DE", "fr", "https://a.example/ios", 1},
		// Android is not ios; DE matches rule 1.
		{"android in DE", time.Time{}, "/rules01", uaAndroid, "de", "", "https://b.example/dach", 2},
		{"android in AT", time.Time{}, "/rules01", uaAndroid, "AT", "", "https://b.example/dach", 2},
		// Not ios, not DE/AT; the preferred language is fr (fr-CH, q=1).
		{"windows fr-CH", time.Time{}, "/rules01", uaWinCh, "FR", "fr-CH, fr;q=0.9, en;q=0.8", "https://c.example/fr", 3},
		// q decides, not the order: fr;q=0.9 beats de;q=0.5.
		{"q order", time.Time{}, "/rules01", uaLinuxCh, "US", "de;q=0.5, fr;q=0.9", "https://c.example/fr", 3},
		// ?ref=qr matches rule 3; the query is forwarded to the rule's URL.
		{"qr code", time.Time{}, "/rules01?ref=qr", uaWinCh, "US", "en-US", "https://d.example/qr?ref=qr", 4},
		{"print", time.Time{}, "/rules01?x=1&ref=print", uaWinCh, "US", "en", "https://d.example/qr?x=1&ref=print", 4},
		// ref=web is neither value; Windows Chrome is not Firefox: fallback.
		{"other ref", time.Time{}, "/rules01?ref=web", uaWinCh, "US", "en", "https://m.example/main?ref=web", 0},
		// Windows AND Firefox: rule 4.
		{"windows firefox", time.Time{}, "/rules01", uaWinFF, "US", "en", "https://e.example/ff", 5},
		// A desktop inside the window: rule 5; outside it: the fallback.
		{"mac in window", inWindow, "/rules01", uaMacCh, "US", "en", "https://f.example/sale", 6},
		{"mac before window", windowFrom.Add(-time.Millisecond), "/rules01", uaMacCh, "US", "en", "https://m.example/main", 0},
		{"mac at window end", windowTo, "/rules01", uaMacCh, "US", "en", "https://m.example/main", 0},
		// A phone in the window is not a desktop: the fallback.
		{"android in window", inWindow, "/rules01", uaAndroid, "US", "en", "https://m.example/main", 0},
		// No user agent, no country, no language: nothing can match.
		{"bare", time.Time{}, "/rules01", "", "", "", "https://m.example/main", 0},
		// "*" and q=0 are no preference.
		{"wildcard", time.Time{}, "/rules01", uaLinuxCh, "", "*, fr;q=0", "https://m.example/main", 0},
	}
	var want []uint8
	for _, c := range cases {
		at := c.at
		if at.IsZero() {
			at = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		e.set(at)
		ctx := ruleRequest(c.path, c.ua, c.c, c.lng)
		e.h(ctx)
		if got := ctx.Response.StatusCode(); got != 302 {
			t.Fatalf("%s: status %d; want 302", c.name, got)
		}
		if got := string(ctx.Response.Header.Peek("Location")); got != c.want {
			t.Errorf("%s: Location %q; want %q", c.name, got, c.want)
		}
		if got := string(ctx.Response.Header.Peek("Cache-Control")); got != "no-store" {
			t.Errorf("%s: Cache-Control %q; want no-store (the answer depends on the visitor)", c.name, got)
		}
		want = append(want, c.rule)
	}
	got := e.rec.take()
	if len(got) != len(want) {
		t.Fatalf("captured %d clicks; want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%s: click records rule %d; want %d", cases[i].name, got[i], want[i])
		}
	}
	// HEAD answers the same redirect and records no click.
	ctx := ruleRequest("/rules01", uaIPhone, "", "")
	ctx.Request.Header.SetMethod("HEAD")
	e.h(ctx)
	if got := string(ctx.Response.Header.Peek("Location")); got != "https://a.example/ios" {
		t.Errorf("HEAD: Location %q", got)
	}
	if got := e.rec.take(); len(got) != 0 {
		t.Errorf("HEAD captured %v", got)
	}
}

// The first rule that matches wins, even when a later one matches too.
func TestRedirectRulesFirstMatchWins(t *testing.T) {
	e := newRuleEnv(t, []store.Rule{
		{URL: "https://one.example/", Countries: []string{"DE"}},
		{URL: "https://two.example/", Countries: []string{"DE"}, Languages: []string{"de"}},
	})
	ctx := ruleRequest("/rules01", "", "DE", "de")
	e.h(ctx)
	if got := string(ctx.Response.Header.Peek("Location")); got != "https://one.example/" {
		t.Fatalf("Location %q; want the first rule's", got)
	}
}

func ruleBenchEnv(tb testing.TB) (*ruleEnv, *fasthttp.RequestCtx) {
	// Three rules, as the benchmark: none matches this visitor, so
	// every request evaluates all three and takes the fallback.
	e := newRuleEnv(tb, []store.Rule{
		{URL: "https://a.example/ios", Devices: store.RuleDeviceIOS},
		{URL: "https://b.example/dach", Countries: []string{"DE", "AT"}},
		{URL: "https://c.example/fr", Languages: []string{"fr"}},
	})
	ctx := ruleRequest("/rules01", uaWinCh, "US", "en-US,en;q=0.9")
	return e, ctx
}

// BenchmarkRedirectCacheHitRules is BenchmarkRedirectCacheHit for a link
// with three rules, the visitor classified through the ingest pipeline's
// cache, without click capture (as BenchmarkRedirectCacheHit).
func BenchmarkRedirectCacheHitRules(b *testing.B) {
	e, ctx := ruleBenchEnv(b)
	e.rec.off, e.rec.next = true, nil
	for range 100 {
		serve(e.h, ctx)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		ctx.Response.Reset()
		e.h(ctx)
	}
	b.StopTimer()
	if got := string(ctx.Response.Header.Peek("Location")); got != "https://m.example/main" {
		b.Fatalf("Location %q", got)
	}
}

// BenchmarkRedirectCacheHitRulesCapture adds the click capture that
// records the rule (compare BenchmarkRedirectCacheHitCapture).
func BenchmarkRedirectCacheHitRulesCapture(b *testing.B) {
	e, ctx := ruleBenchEnv(b)
	warmRules(b, e, ctx)
	e.rec.mu.Lock()
	e.rec.off = true // the recorder would append; capture alone
	e.rec.mu.Unlock()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		ctx.Response.Reset()
		e.h(ctx)
	}
}

// warmRules fills the capture pool and waits for the writer to drain it.
func warmRules(tb testing.TB, e *ruleEnv, ctx *fasthttp.RequestCtx) {
	tb.Helper()
	for range 20000 {
		if got := serve(e.h, ctx); got != fasthttp.StatusFound {
			tb.Fatalf("status: got %d; want 302", got)
		}
		e.rec.take()
	}
	deadline := time.Now().Add(10 * time.Second)
	for e.p.QueueLen() > 0 {
		if time.Now().After(deadline) {
			tb.Fatal("the capture queue did not drain")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestRedirectRulesAllocateNothing(t *testing.T) {
	if edge.RaceEnabled {
		t.Skip("allocation counts do not hold under the race detector")
	}
	e, ctx := ruleBenchEnv(t)
	e.rec.off, e.rec.next = true, nil
	if n := testing.AllocsPerRun(1000, func() { serve(e.h, ctx) }); n != 0 {
		t.Fatalf("%v allocations per redirect of a link with rules; want 0", n)
	}
	// An iPhone: classified, matched on the first rule.
	ios := ruleRequest("/rules01", uaIPhone, "DE", "fr")
	if n := testing.AllocsPerRun(1000, func() { serve(e.h, ios) }); n != 0 {
		t.Fatalf("%v allocations per redirect that matches a rule; want 0", n)
	}
	if got := string(ios.Response.Header.Peek("Location")); got != "https://a.example/ios" {
		t.Fatalf("Location %q", got)
	}
}

// BenchmarkRedirectCacheHitRulesParallel is the rules benchmark from every
// core: the classifier's one lock is what they share.
func BenchmarkRedirectCacheHitRulesParallel(b *testing.B) {
	e, warmCtx := ruleBenchEnv(b)
	e.rec.off, e.rec.next = true, nil
	serve(e.h, warmCtx) // builds the classifier once
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := ruleRequest("/rules01", uaWinCh, "US", "en-US,en;q=0.9")
		for pb.Next() {
			serve(e.h, ctx)
		}
	})
}
