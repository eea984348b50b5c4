package ingest

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
	"github.com/waymark/waymark/store"
)

// serve runs h on a real fasthttp server on 127.0.0.1:0 and returns its URL.
func serve(t *testing.T, h fasthttp.RequestHandler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: h, MaxRequestBodySize: 1 << 20}
	go srv.Serve(ln)
	t.Cleanup(func() { _ = srv.Shutdown() })
	return "http://" + ln.Addr().String()
}

func eventPipeline(t *testing.T, mutate func(*Config)) (*Pipeline, string) {
	t.Helper()
	p := openTestPipeline(t, func(c *Config) {
		c.Sites = NewSites()
		c.Sites.Put(store.Site{ID: "site-a", Domain: "a.example"})
		c.Sites.Put(store.Site{ID: "site-b", Domain: "www.B.example"})
		if mutate != nil {
			mutate(c)
		}
	})
	return p, serve(t, p.EventHandler())
}

type eventResp struct {
	status  int
	dropped string
	body    string
}

func postEvent(t *testing.T, url, contentType, body string, headers map[string]string) eventResp {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/api/event", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("User-Agent", firefoxUA)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return eventResp{resp.StatusCode, resp.Header.Get(DroppedHeader), sb.String()}
}

func TestEventHandlerAccepts(t *testing.T) {
	p, url := eventPipeline(t, nil)
	short := `{"n":"pageview","u":"https://a.example/docs/start?utm_source=tw&utm_campaign=x&email=me@x.org#top","d":"a.example","r":"https://www.Google.com/search?q=private","w":1280}`
	long := `{"name":"signup","url":"https://b.example/pricing","domain":"b.example","referrer":"https://b.example/home","props":{"plan":"pro","seats":5,"nested":{"x":1},"empty":""},"screen_width":390,"interactive":false}`
	engagement := `{"n":"engagement","u":"https://a.example/docs/start","d":"a.example","e":4200,"sd":130}`
	propsString := `{"n":"custom","u":"https://a.example/","d":"a.example","p":"{\"k\":\"v\"}","h":1}`
	for _, tc := range []struct{ ctype, body string }{
		{"application/json", short},
		{"text/plain", long},
		{"text/plain;charset=UTF-8", engagement},
		{"text/plain", propsString},
	} {
		if r := postEvent(t, url, tc.ctype, tc.body, nil); r.status != http.StatusAccepted || r.dropped != "" {
			t.Fatalf("POST %s: got %d dropped %q body %s; want 202", tc.body, r.status, r.dropped, r.body)
		}
	}
	events := closeAndRead(t, p)
	if len(events) != 4 {
		t.Fatalf("got %d events; want 4", len(events))
	}
	pv, su, en, cu := events[0], events[1], events[2], events[3]
	if pv.Kind != KindPageview || pv.SiteID != "site-a" || pv.Path != "/docs/start" || pv.ReferrerHost != "google.com" ||
		pv.UTMSource != "tw" || pv.UTMCampaign != "x" || pv.Device != DeviceDesktop || pv.Browser != "Firefox" {
		t.Errorf("pageview: got %+v", pv)
	}
	if su.Kind != KindCustom || su.Name != "signup" || su.SiteID != "site-b" || su.ReferrerHost != "" ||
		su.Flags&FlagNonInteractive == 0 || su.Device != DeviceDesktop { // from the Firefox user agent, whatever "w" says
		t.Errorf("custom: got %+v", su)
	}
	wantProps := []Prop{{"plan", "pro"}, {"seats", "5"}}
	if len(su.Props) != 2 || su.Props[0] != wantProps[0] || su.Props[1] != wantProps[1] {
		t.Errorf("props: got %v; want %v", su.Props, wantProps)
	}
	if en.Kind != KindEngagement || en.EngagedMS != 4200 || en.ScrollDepth != 100 {
		t.Errorf("engagement: got %+v; want 4200 ms, depth clamped to 100", en)
	}
	if cu.Path != "/" || len(cu.Props) != 1 || cu.Props[0] != (Prop{"k", "v"}) {
		t.Errorf("props from a JSON string: got %+v", cu)
	}
	assertNoSecrets(t, p.cfg.Dir, netip.MustParseAddr("127.0.0.1"), "utm_source", "email=", "me@x.org", "private", "#top", "search")
}

func TestEventHandlerFanOut(t *testing.T) {
	p, url := eventPipeline(t, nil)
	r := postEvent(t, url, "text/plain", `{"n":"pageview","u":"https://a.example/","d":"a.example, www.b.example,a.example"}`, nil)
	if r.status != http.StatusAccepted {
		t.Fatalf("got %d; want 202", r.status)
	}
	events := closeAndRead(t, p)
	if len(events) != 2 || events[0].SiteID != "site-a" || events[1].SiteID != "site-b" {
		t.Fatalf("got %d events %+v; want one each for site-a and site-b", len(events), events)
	}
	if events[0].VisitorHash == events[1].VisitorHash {
		t.Errorf("got the same visitor hash for two sites; want a hash per site")
	}
	if events[0].ID == events[1].ID {
		t.Errorf("fanned-out events share an id")
	}
}

func TestEventHandlerRejects(t *testing.T) {
	_, url := eventPipeline(t, func(c *Config) { c.MaxBodyBytes = 512 })
	for _, tc := range []struct {
		body   string
		status int
		field  string
	}{
		{`not json`, 400, "request"},
		{`[1,2]`, 400, "request"},
		{`{"u":"https://a.example/","d":"a.example"}`, 400, "name"},
		{`{"n":"pageview","d":"a.example"}`, 400, "url"},
		{`{"n":"pageview","u":"data:text/html,hi","d":"a.example"}`, 400, "url"},
		{`{"n":"pageview","u":"/relative","d":"a.example"}`, 400, "url"},
		{`{"n":"pageview","u":"https://a.example/","d":" , "}`, 400, "domain"},
		{`{"n":"engagement","u":"https://a.example/","d":"a.example"}`, 400, "engagement"},
		{`{"n":"` + strings.Repeat("n", 121) + `","u":"https://a.example/"}`, 400, "name"},
		{`{"n":"pageview","u":"https://a.example/","p":{` + manyProps(31) + `}}`, 413, "request"},
		{`{"n":"pageview","u":"https://a.example/` + strings.Repeat("a", 600) + `"}`, 413, "request"},
	} {
		r := postEvent(t, url, "text/plain", tc.body, nil)
		if r.status != tc.status {
			t.Errorf("%.60s: got %d; want %d", tc.body, r.status, tc.status)
			continue
		}
		var reason struct {
			Error  string              `json:"error"`
			Errors map[string][]string `json:"errors"`
		}
		if err := json.Unmarshal([]byte(r.body), &reason); err != nil || reason.Error == "" || len(reason.Errors[tc.field]) != 1 {
			t.Errorf("%.60s: got body %s; want a JSON reason for %q", tc.body, r.body, tc.field)
		}
	}
}

func TestEventHandlerPropLimits(t *testing.T) {
	_, url := eventPipeline(t, nil)
	for _, body := range []string{
		`{"n":"x","u":"https://a.example/","p":{` + manyProps(31) + `}}`,
		`{"n":"x","u":"https://a.example/","p":{"` + strings.Repeat("k", 301) + `":"v"}}`,
		`{"n":"x","u":"https://a.example/","p":{"k":"` + strings.Repeat("v", 2001) + `"}}`,
	} {
		if r := postEvent(t, url, "text/plain", body, nil); r.status != 400 || !strings.Contains(r.body, "props") {
			t.Errorf("got %d %s; want 400 about props", r.status, r.body)
		}
	}
}

func manyProps(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = `"k` + strings.Repeat("x", i) + `":"v"`
	}
	return strings.Join(parts, ",")
}

func TestEventHandlerDropsWithReason(t *testing.T) {
	p, url := eventPipeline(t, func(c *Config) { c.IPBurst = 3; c.IPRate = 0.001 })
	pv := func(domain string) string {
		return `{"n":"pageview","u":"https://` + domain + `/","d":"` + domain + `"}`
	}
	cases := []struct {
		body, origin, want string
	}{
		{pv("unknown.example"), "", DropUnknownSite},
		{pv("a.example"), "https://evil.example", DropOrigin},
		{pv("a.example"), "https://shop.a.example", ""}, // subdomain origin is fine
		{pv("a.example"), "https://a.example", ""},
		{pv("a.example"), "", ""},
		{pv("a.example"), "", DropRateLimit}, // fourth accepted from this IP
	}
	for _, tc := range cases {
		h := map[string]string{}
		if tc.origin != "" {
			h["Origin"] = tc.origin
		}
		r := postEvent(t, url, "text/plain", tc.body, h)
		if r.status != http.StatusAccepted || r.dropped != tc.want {
			t.Errorf("%s origin %q: got %d dropped %q; want 202 dropped %q", tc.body, tc.origin, r.status, r.dropped, tc.want)
		}
	}
	for _, reason := range []string{DropUnknownSite, DropOrigin, DropRateLimit} {
		if p.Dropped(reason) != 1 {
			t.Errorf("got %d %s drops; want 1", p.Dropped(reason), reason)
		}
	}
	if got := len(closeAndRead(t, p)); got != 3 {
		t.Errorf("got %d stored events; want 3", got)
	}
}

func TestEventHandlerStoresBots(t *testing.T) {
	p, url := eventPipeline(t, nil)
	r := postEvent(t, url, "text/plain", `{"n":"pageview","u":"https://a.example/"}`,
		map[string]string{"User-Agent": "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)"})
	if r.status != http.StatusAccepted || r.dropped != "" {
		t.Fatalf("got %d dropped %q; want 202 and stored", r.status, r.dropped)
	}
	events := closeAndRead(t, p)
	if len(events) != 1 || !events[0].Bot() {
		t.Fatalf("got %+v; want one bot-flagged event", events)
	}
}

func TestEventHandlerMethods(t *testing.T) {
	_, url := eventPipeline(t, nil)
	req, _ := http.NewRequest(http.MethodOptions, url+"/api/event", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("OPTIONS: got %d, ACAO %q; want 204 *", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	resp, err = http.Get(url + "/api/event")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: got %d; want 405", resp.StatusCode)
	}
}

func BenchmarkEventHandler(b *testing.B) {
	p := openTestPipeline(b, func(c *Config) {
		c.Sites = NewSites()
		c.Sites.Put(store.Site{ID: "site-a", Domain: "a.example"})
		c.IPRate, c.IPBurst, c.SiteRate, c.SiteBurst = 1e12, 1e12, 1e12, 1e12
	})
	h := p.EventHandler()
	body := []byte(`{"n":"pageview","u":"https://a.example/docs/start?utm_source=tw","d":"a.example","r":"https://www.google.com/","w":1280}`)
	var req fasthttp.Request
	req.Header.SetMethod("POST")
	req.SetRequestURI("/api/event")
	req.Header.SetContentType("text/plain")
	req.Header.SetUserAgent(firefoxUA)
	req.SetBody(body)
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(203, 0, 113, 7), Port: 1}, nil)
	b.ReportAllocs()
	for b.Loop() {
		ctx.Response.Reset()
		h(&ctx)
		if ctx.Response.StatusCode() != fasthttp.StatusAccepted {
			b.Fatalf("got %d", ctx.Response.StatusCode())
		}
	}
	b.StopTimer()
	_ = p.Close(context.Background())
}
