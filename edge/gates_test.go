package edge

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/store"
)

// Real user agents of the unfurlers, one per token of crawlerTokens.
var crawlerUAs = []string{
	"facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
	"Facebot",
	"Twitterbot/1.0",
	"Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
	"LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient +http://www.linkedin.com)",
	"Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)",
	"WhatsApp/2.23.20.0 A",
	"TelegramBot (like TwitterBot)",
	"Mozilla/5.0 (Windows NT 6.1; WOW64) SkypeUriPreview Preview/0.5",
	"Mozilla/5.0 (compatible; redditbot/1.0; +http://www.reddit.com/feedback)",
	"http.rb/5.1.1 (Mastodon/4.2.0; +https://mastodon.social/)",
}

const (
	browserUA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
	curlUA    = "curl/8.5.0"
)

func TestCrawlerTokensEachHaveAUserAgent(t *testing.T) {
	if len(crawlerUAs) != len(crawlerTokens) {
		t.Fatalf("got %d sample user agents for %d tokens", len(crawlerUAs), len(crawlerTokens))
	}
	for i, ua := range crawlerUAs {
		if !strings.Contains(ua, string(crawlerTokens[i])) || !isCrawler([]byte(ua)) {
			t.Errorf("%q: not matched by token %q", ua, crawlerTokens[i])
		}
	}
	for _, ua := range []string{browserUA, curlUA, "", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) Mobile/15E148"} {
		if isCrawler([]byte(ua)) {
			t.Errorf("%q: taken for a crawler", ua)
		}
	}
	ua := []byte(crawlerUAs[3])
	if n := testing.AllocsPerRun(100, func() { isCrawler(ua) }); n != 0 {
		t.Errorf("isCrawler: %v allocations; want 0", n)
	}
}

// clickCounter counts the clicks the server hands to OnRedirect.
func clickCounter(n *atomic.Int64) func(*Config) {
	return func(c *Config) {
		c.OnRedirect = func(*fasthttp.RequestCtx, []byte) { n.Add(1) }
	}
}

func TestPreviewCrawlerGetsEscapedTags(t *testing.T) {
	var clicks atomic.Int64
	e := newEnv(t, clickCounter(&clicks))
	v := e.createLink(keyAlice, `{"url":"https://example.com/a?x=1&y=2","alias":"pv1",
		"preview":{"title":"<b>\"Tom & Jerry\"</b>","description":"It's <script>alert(1)</script>","image":"https://img.example/p.png?a=1&b=2"}}`)
	if v.Preview == nil || v.Preview.Title != `<b>"Tom & Jerry"</b>` || v.Preview.Image != "https://img.example/p.png?a=1&b=2" {
		t.Fatalf("preview in the view: got %+v", v.Preview)
	}
	// Worked out by hand from html.EscapeString: < > & ' " become
	// &lt; &gt; &amp; &#39; &#34;.
	want := []string{
		`<meta property="og:type" content="website">`,
		`<meta property="og:title" content="&lt;b&gt;&#34;Tom &amp; Jerry&#34;&lt;/b&gt;">`,
		`<meta property="og:description" content="It&#39;s &lt;script&gt;alert(1)&lt;/script&gt;">`,
		`<meta property="og:image" content="https://img.example/p.png?a=1&amp;b=2">`,
		`<meta name="twitter:card" content="summary_large_image">`,
		`<meta name="twitter:title" content="&lt;b&gt;&#34;Tom &amp; Jerry&#34;&lt;/b&gt;">`,
		`<meta name="twitter:image" content="https://img.example/p.png?a=1&amp;b=2">`,
		`<meta http-equiv="refresh" content="0; url=https://example.com/a?x=1&amp;y=2">`,
	}
	for i, ua := range crawlerUAs {
		r := e.do("GET", "/pv1", "", "", "User-Agent", ua)
		if r.status != 200 || r.get("Content-Type") != "text/html; charset=utf-8" {
			t.Fatalf("%s: got %d %q; want 200 text/html", ua, r.status, r.get("Content-Type"))
		}
		body := string(r.body)
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: page lacks %s\n%s", ua, w, body)
			}
		}
		if strings.Contains(body, "<script>") || strings.Contains(body, "<b>") {
			t.Errorf("%s: unescaped markup in the page:\n%s", ua, body)
		}
		if r.get("Vary") != "User-Agent" || r.get("Location") != "" {
			t.Errorf("%s: Vary %q Location %q; want User-Agent and none", ua, r.get("Vary"), r.get("Location"))
		}
		if got := clicks.Load(); got != int64(i+1) {
			t.Errorf("%s: clicks handed on: got %d; want %d (a crawler's fetch is captured, and marked bot downstream)", ua, got, i+1)
		}
	}
	for _, ua := range []string{browserUA, curlUA} {
		r := e.do("GET", "/pv1", "", "", "User-Agent", ua)
		if r.status != 302 || r.get("Location") != "https://example.com/a?x=1&y=2" || len(r.body) != 0 {
			t.Errorf("%s: got %d Location %q body %d bytes; want 302 to the destination", ua, r.status, r.get("Location"), len(r.body))
		}
		if r.get("Vary") != "User-Agent" {
			t.Errorf("%s: Vary %q; want User-Agent", ua, r.get("Vary"))
		}
	}
	if got := counterValue(e.set, `waymark_preview_answers_total{answer="page"}`); got != uint64(len(crawlerUAs)) {
		t.Errorf("preview pages: got %d; want %d", got, len(crawlerUAs))
	}

	// Without a preview, crawlers get the redirect as before.
	e.createLink(keyAlice, `{"url":"https://example.com/plain","alias":"pv2"}`)
	for _, ua := range crawlerUAs {
		if r := e.do("GET", "/pv2", "", "", "User-Agent", ua); r.status != 302 || r.get("Location") != "https://example.com/plain" {
			t.Errorf("%s on a link without preview: got %d %q; want 302", ua, r.status, r.get("Location"))
		}
	}
	// PATCH null removes the preview; crawlers get the 302 again.
	r := e.do("PATCH", "/v1/links/pv1", keyAlice, `{"preview":null}`)
	e.expect(r, 200, "")
	if strings.Contains(string(r.body), `"title"`) || !strings.Contains(string(r.body), `"preview":null`) {
		t.Errorf("view after removing the preview: %s", r.body)
	}
	if r := e.do("GET", "/pv1", "", "", "User-Agent", crawlerUAs[0]); r.status != 302 {
		t.Errorf("crawler after the preview was removed: got %d; want 302", r.status)
	}
}

func TestPreviewValidation(t *testing.T) {
	e := newEnv(t, nil)
	cases := []struct{ body, problem string }{
		{`{"url":"https://example.com","preview":{"image":"javascript:alert(1)"}}`, "invalid-request"},
		{`{"url":"https://example.com","preview":{"image":"http://exa mple.com/x.png"}}`, "invalid-url"},
		{`{"url":"https://example.com","preview":{"image":"https://evil.example/x.png"}}`, "destination-blocked"},
		{`{"url":"https://example.com","preview":{"title":"` + strings.Repeat("t", store.MaxPreviewTitle+1) + `"}}`, "invalid-request"},
		{`{"url":"https://example.com","preview":{"description":"` + strings.Repeat("d", store.MaxPreviewDescription+1) + `"}}`, "invalid-request"},
		{`{"url":"https://example.com","preview":{"title":"a\nb"}}`, "invalid-request"},
		{`{"url":"https://example.com","preview":{}}`, "invalid-request"},
		{`{"url":"https://example.com","preview":{"colour":"red"}}`, "invalid-request"},
		{`{"url":"https://example.com","preview":"title"}`, "invalid-request"},
		{`{"url":"https://example.com","password":"` + strings.Repeat("p", MaxPasswordLen+1) + `"}`, "invalid-request"},
		{`{"url":"https://example.com","password":12}`, "invalid-request"},
	}
	for _, c := range cases {
		want := 400
		if c.problem == "destination-blocked" {
			want = 422
		}
		r := e.do("POST", "/v1/links", keyAlice, c.body)
		if r.status != want || r.problem(t).Type != "/problems/"+c.problem {
			t.Errorf("%.80s: got %d %s; want %d %s", c.body, r.status, r.body, want, c.problem)
		}
	}
	// Bulk items take neither field: refused, never silently dropped.
	r := e.do("POST", "/v1/links/bulk", keyAlice, `{"links":[{"url":"https://example.com","password":"pw"}]}`)
	if r.status == 201 || r.status == 200 {
		if !strings.Contains(string(r.body), "unknown field") {
			t.Errorf("bulk with a password: got %d %s; want the item refused", r.status, r.body)
		}
	}
}

// unlockClient posts the form from a given loopback address, as a
// browser on another machine would.
func (e *env) unlock(from, path, password string) *response {
	e.t.Helper()
	c := &fasthttp.HostClient{Addr: e.addr, ReadTimeout: 10 * time.Second, Dial: func(addr string) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		return d.Dial("tcp", addr)
	}}
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	req.Header.SetMethod("POST")
	req.SetRequestURI("http://" + e.addr + path)
	req.Header.SetContentType("application/x-www-form-urlencoded")
	req.SetBodyString(url.Values{"password": {password}}.Encode())
	resp := &fasthttp.Response{}
	if err := c.Do(req, resp); err != nil {
		e.t.Fatalf("POST %s from %s: %v", path, from, err)
	}
	r := &response{status: resp.StatusCode(), header: &fasthttp.ResponseHeader{}, body: append([]byte(nil), resp.Body()...)}
	resp.Header.CopyTo(r.header)
	return r
}

func TestPasswordFormAndUnlock(t *testing.T) {
	var clicks atomic.Int64
	e := newEnv(t, clickCounter(&clicks))
	const dest = "https://secret.example/doc?id=42"
	v := e.createLink(keyAlice, `{"url":"`+dest+`","alias":"pw1","password":"open sesame","preview":{"title":"A shared doc"}}`)
	if !v.PasswordProtected {
		t.Fatalf("create: password_protected false in %+v", v)
	}
	for _, path := range []string{"/v1/links/pw1", "/v1/links?limit=10"} {
		r := e.do("GET", path, keyAlice, "")
		e.expect(r, 200, "")
		if !strings.Contains(string(r.body), `"password_protected":true`) || strings.Contains(string(r.body), "argon2") ||
			strings.Contains(string(r.body), "open sesame") || strings.Contains(string(r.body), `"password"`) {
			t.Errorf("GET %s shows the password or its hash, or not the flag: %s", path, r.body)
		}
	}
	var l store.Link
	if _, err := e.st.GetLink([]byte("pw1"), &l); err != nil || !strings.HasPrefix(l.PasswordHash, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("stored hash: got %q (%v); want a PHC argon2id string", l.PasswordHash, err)
	}

	for _, ua := range []string{browserUA, crawlerUAs[0]} {
		r := e.do("GET", "/pw1", "", "", "User-Agent", ua)
		if r.status != 200 || r.get("Location") != "" {
			t.Fatalf("GET as %s: got %d Location %q; want the form", ua, r.status, r.get("Location"))
		}
		body := string(r.body)
		if strings.Contains(body, "secret.example") || !strings.Contains(body, `<form method="post"`) || !strings.Contains(body, `name="password"`) {
			t.Errorf("form page: destination shown or no form:\n%s", body)
		}
		if !strings.Contains(body, `<meta property="og:title" content="A shared doc">`) || strings.Contains(body, "http-equiv") {
			t.Errorf("form page: want the preview tags and no refresh:\n%s", body)
		}
		if got := r.get("Content-Security-Policy"); got != "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'" {
			t.Errorf("CSP: got %q", got)
		}
		if r.get("Cache-Control") != "no-store" || r.get("X-Robots-Tag") != "noindex, nofollow" || r.get("Referrer-Policy") != "no-referrer" {
			t.Errorf("headers: Cache-Control %q X-Robots-Tag %q Referrer-Policy %q", r.get("Cache-Control"), r.get("X-Robots-Tag"), r.get("Referrer-Policy"))
		}
	}
	if clicks.Load() != 0 {
		t.Fatalf("the form counted %d clicks; want 0", clicks.Load())
	}
	r := e.unlock("127.0.0.1", "/pw1", "open sesam")
	if r.status != 200 || r.get("Location") != "" || !strings.Contains(string(r.body), "not right") || strings.Contains(string(r.body), "secret.example") {
		t.Fatalf("wrong password: got %d Location %q\n%s", r.status, r.get("Location"), r.body)
	}
	if clicks.Load() != 0 {
		t.Fatalf("a wrong password counted a click")
	}
	r = e.unlock("127.0.0.1", "/pw1?utm_source=mail", "open sesame")
	if r.status != 302 || r.get("Location") != dest+"&utm_source=mail" || r.get("Cache-Control") != "no-store" {
		t.Fatalf("right password: got %d Location %q Cache-Control %q; want 302 to the destination with the query, no-store", r.status, r.get("Location"), r.get("Cache-Control"))
	}
	if clicks.Load() != 1 {
		t.Fatalf("clicks after the unlock: got %d; want 1", clicks.Load())
	}
	if got := counterValue(e.set, `waymark_password_attempts_total{result="wrong"}`); got != 1 {
		t.Errorf("wrong attempts: got %d; want 1", got)
	}

	// PATCH changes the password, then removes it ("" and null alike).
	e.expect(e.do("PATCH", "/v1/links/pw1", keyAlice, `{"password":"new one"}`), 200, "")
	if r := e.unlock("127.0.0.2", "/pw1", "open sesame"); r.status != 200 {
		t.Errorf("old password after the change: got %d; want 200 (the form again)", r.status)
	}
	if r := e.unlock("127.0.0.2", "/pw1", "new one"); r.status != 302 {
		t.Errorf("new password: got %d; want 302", r.status)
	}
	for _, body := range []string{`{"password":""}`, `{"password":null}`} {
		r := e.do("PATCH", "/v1/links/pw1", keyAlice, body)
		e.expect(r, 200, "")
		if !strings.Contains(string(r.body), `"password_protected":false`) {
			t.Errorf("PATCH %s: %s", body, r.body)
		}
		if r := e.do("GET", "/pw1", "", "", "User-Agent", browserUA); r.status != 302 {
			t.Errorf("after PATCH %s: GET got %d; want 302", body, r.status)
		}
	}
	if r := e.unlock("127.0.0.2", "/pw1", "new one"); r.status != 405 {
		t.Errorf("POST to a link without a password: got %d; want 405", r.status)
	}
	// A history entry says the password changed, never what it is.
	r = e.do("GET", "/v1/links/pw1/history", keyAlice, "")
	e.expect(r, 200, "")
	if strings.Contains(string(r.body), "argon2") || !strings.Contains(string(r.body), `"field":"password"`) {
		t.Errorf("history: %s", r.body)
	}
}

func TestPasswordTemporaryRedirectAnswersSeeOther(t *testing.T) {
	e := newEnv(t, nil)
	e.createLink(keyAlice, `{"url":"https://example.com/t","alias":"pw307","redirect":307,"password":"pw"}`)
	if r := e.unlock("127.0.0.1", "/pw307", "pw"); r.status != 303 || r.get("Location") != "https://example.com/t" {
		t.Errorf("307 link unlocked: got %d %q; want 303 (a 307 would post the password on)", r.status, r.get("Location"))
	}
	// A permanent link that browsers may have cached cannot get one later.
	e.createLink(keyAlice, `{"url":"https://example.com/p","alias":"perm","redirect":301}`)
	e.expect(e.do("PATCH", "/v1/links/perm", keyAlice, `{"password":"pw"}`), 409, "permanent-redirect")
}

func TestPasswordAttemptLimits(t *testing.T) {
	var clicks atomic.Int64
	e := newEnv(t, clickCounter(&clicks))
	e.createLink(keyAlice, `{"url":"https://example.com/x","alias":"lim","password":"right"}`)
	for i := range unlockPerClientLink {
		if r := e.unlock("127.0.0.1", "/lim", "wrong"); r.status != 200 {
			t.Fatalf("attempt %d: got %d; want 200", i+1, r.status)
		}
	}
	// The sixth, even with the right password, is refused before any check.
	r := e.unlock("127.0.0.1", "/lim", "right")
	if r.status != 429 || r.get("Retry-After") != "12" || strings.Contains(string(r.body), "example.com") {
		t.Fatalf("attempt %d: got %d Retry-After %q; want 429 after 12 s (5 a minute)", unlockPerClientLink+1, r.status, r.get("Retry-After"))
	}
	if got := counterValue(e.set, `waymark_password_attempts_total{result="wrong"}`); got != unlockPerClientLink {
		t.Errorf("checks run: got %d wrong; want %d (the limited attempt must not be checked)", got, unlockPerClientLink)
	}
	// Another client still may; so may this one once a token is back.
	if r := e.unlock("127.0.0.2", "/lim", "right"); r.status != 302 {
		t.Errorf("another client: got %d; want 302", r.status)
	}
	e.clock.Advance(12 * time.Second)
	if r := e.unlock("127.0.0.1", "/lim", "right"); r.status != 302 {
		t.Errorf("after 12 s: got %d; want 302", r.status)
	}
	if clicks.Load() != 2 {
		t.Errorf("clicks: got %d; want 2", clicks.Load())
	}

	// Per link: 30 a minute over every client, spread here over six
	// addresses that stay within their own limit.
	e.createLink(keyAlice, `{"url":"https://example.com/y","alias":"lim2","password":"right"}`)
	sent := 0
	for ip := 10; sent < unlockPerLink; ip++ {
		for range unlockPerClientLink {
			if sent == unlockPerLink {
				break
			}
			if r := e.unlock("127.0.1."+strconv.Itoa(ip), "/lim2", "wrong"); r.status != 200 {
				t.Fatalf("per-link attempt %d: got %d; want 200", sent+1, r.status)
			}
			sent++
		}
	}
	r = e.unlock("127.0.2.1", "/lim2", "right")
	if r.status != 429 || r.get("Retry-After") != "2" {
		t.Fatalf("attempt %d on the link from a fresh client: got %d Retry-After %q; want 429 after 2 s (30 a minute)", unlockPerLink+1, r.status, r.get("Retry-After"))
	}
	if got := counterValue(e.set, `waymark_password_attempts_total{result="limited_link"}`); got != 1 {
		t.Errorf("limited_link: got %d; want 1", got)
	}
}

// benchGatedServer is benchServer with a link that has a preview and one
// that has a password.
func benchGatedServer(b *testing.B) *Server {
	srv, w := benchServer(b, Config{})
	preview := store.EncodePreview(store.Preview{Title: "Spring sale", Description: "Up to 40% off", Image: "https://img.example/s.png"})
	w.putLink(b, store.Link{Code: "prv1234", URL: "https://example.com/sale", Owner: "o", Preview: preview})
	w.putLink(b, store.Link{Code: "pwd1234", URL: "https://example.com/doc", Owner: "o", PasswordHash: "$argon2id$v=19$m=19456,t=2,p=1$AQEBAQEBAQEBAQEBAQEBAQ$AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI"})
	return srv
}

// A link with a preview, visited by a browser: the redirect, 0 allocs.
func BenchmarkRedirectCacheHitPreviewBrowser(b *testing.B) {
	srv := benchGatedServer(b)
	benchServeUA(b, srv.Handler(), "/prv1234", browserUA, 302)
}

// The same link fetched by an unfurler: the pre-built page, 0 allocs.
func BenchmarkRedirectCacheHitPreviewCrawler(b *testing.B) {
	srv := benchGatedServer(b)
	benchServeUA(b, srv.Handler(), "/prv1234", crawlerUAs[3], 200)
}

// A password link's form page: pre-built, 0 allocs.
func BenchmarkRedirectCacheHitPasswordForm(b *testing.B) {
	srv := benchGatedServer(b)
	benchServeUA(b, srv.Handler(), "/pwd1234", browserUA, 200)
}

func benchServeUA(b *testing.B, h fasthttp.RequestHandler, path, ua string, want int) {
	ctx := requestCtx("GET", path)
	ctx.Request.Header.SetUserAgent(ua)
	if !serveOnce(h, ctx, want) { // warm the cache
		b.Fatalf("status: got %d; want %d", ctx.Response.StatusCode(), want)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if !serveOnce(h, ctx, want) {
			b.Fatalf("status: got %d; want %d", ctx.Response.StatusCode(), want)
		}
	}
}

// FuzzGatesBody: the password and preview fields of create and edit
// bodies never decode to something the store would refuse.
func FuzzGatesBody(f *testing.F) {
	for _, s := range []string{
		`{"url":"x","password":"pw"}`, `{"url":"x","password":""}`, `{"url":"x","password":null}`, `{"url":"x","password":1}`,
		`{"url":"x","preview":{"title":"T","description":"D","image":"https://i.example/x"}}`,
		`{"url":"x","preview":{"title":"a\u0000b"}}`, `{"url":"x","preview":{}}`, `{"url":"x","preview":[]}`, `{"url":"x","preview":null}`,
		`{"password":"new"}`, `{"password":null,"preview":null}`, `{"preview":{"image":"ftp://x"}}`, `{"preview":{"title":"\xff"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(g gateFields) {
			if g.password != "" && checkPassword(g.password) != nil {
				t.Fatalf("%q: accepted password %q", body, g.password)
			}
			if !g.preview.IsZero() && g.preview.Check() != nil {
				t.Fatalf("%q: accepted preview %+v: %v", body, g.preview, g.preview.Check())
			}
			if err := store.CheckStoredPreview(store.EncodePreview(g.preview)); err != nil {
				t.Fatalf("%q: preview does not store: %v", body, err)
			}
		}
		if req, _, err := decodeCreate(body); err == nil {
			g := gateFields{password: req.Password}
			if req.Preview != nil {
				g.preview = *req.Preview
			}
			if req.Protected != (req.Password != "") {
				t.Fatalf("%q: Protected %v with password %q", body, req.Protected, req.Password)
			}
			check(g)
		}
		if req, err := decodePatch(body); err == nil {
			check(req.gates)
		}
	})
}

// A link under review shows the review page, which names the destination:
// with a password, the form comes first.
func TestPasswordFormBeforeReviewPage(t *testing.T) {
	e := newEnv(t, nil)
	const phc = "$argon2id$v=19$m=19456,t=2,p=1$AQEBAQEBAQEBAQEBAQEBAQ$AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI"
	e.w.putLink(t, store.Link{Code: "rev1", URL: "https://hidden.example/x", Owner: "alice", Status: store.StatusReview, Redirect: 302, PasswordHash: phc})
	e.w.putLink(t, store.Link{Code: "rev2", URL: "https://hidden.example/y", Owner: "alice", Redirect: 302, PasswordHash: phc,
		ReviewUntil: e.clock.Now().Add(time.Hour).UnixMilli()})
	for _, code := range []string{"rev1", "rev2"} {
		r := e.do("GET", "/"+code, "", "")
		if r.status != 200 || strings.Contains(string(r.body), "hidden.example") || !strings.Contains(string(r.body), `name="password"`) {
			t.Errorf("%s: got %d\n%s\nwant the form, without the destination", code, r.status, r.body)
		}
	}
}

// With every argon2id slot taken, an attempt waits unlockSlotWait and
// answers 503, and an API call with a password answers 503 unavailable.
func TestPasswordSlotsBusy(t *testing.T) {
	e := newEnv(t, nil)
	e.createLink(keyAlice, `{"url":"https://example.com/b","alias":"busy1","password":"pw"}`)
	for range cap(e.srv.passwords.slots) {
		e.srv.passwords.slots <- struct{}{}
	}
	r := e.unlock("127.0.0.1", "/busy1", "pw")
	if r.status != 503 || r.get("Retry-After") != "1" {
		t.Errorf("unlock with no slot: got %d Retry-After %q; want 503 after 1 s", r.status, r.get("Retry-After"))
	}
	r = e.do("POST", "/v1/links", keyAlice, `{"url":"https://example.com/c","password":"pw"}`)
	e.expect(r, 503, "unavailable")
	for range cap(e.srv.passwords.slots) {
		<-e.srv.passwords.slots
	}
	if r := e.unlock("127.0.0.1", "/busy1", "pw"); r.status != 302 {
		t.Errorf("unlock once slots are free: got %d; want 302", r.status)
	}
	if got := counterValue(e.set, `waymark_password_attempts_total{result="busy"}`); got != 1 {
		t.Errorf("busy attempts: got %d; want 1", got)
	}
}
