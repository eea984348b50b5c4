package api

import (
	"bytes"
	"compress/gzip"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// startDashboard serves DashboardHandler at DashboardPath on a loopback
// listener and returns the base URL.
func startDashboard(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	h := DashboardHandler()
	srv := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			if string(ctx.Path()) != DashboardPath {
				ctx.NotFound()
				return
			}
			h(ctx)
		},
		NoDefaultContentType: true, // as the edge server: every type is set on purpose
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	return "http://" + ln.Addr().String()
}

// plainClient does not ask for gzip by itself, so the tests see exactly
// what the handler sends.
var plainClient = &http.Client{Transport: &http.Transport{DisableCompression: true}}

type dashResponse struct {
	status int
	header http.Header
	body   []byte
}

func dashGet(t *testing.T, method, url string, hdr ...string) dashResponse {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := plainClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	return dashResponse{status: resp.StatusCode, header: resp.Header, body: b}
}

var assetRef = regexp.MustCompile(`(?:src|href)="(/dashboard\?asset=[^"]+)"`)

// dashboardAssets loads the page and every asset it names, keyed by the
// path and query the page uses ("" for the page itself).
func dashboardAssets(t *testing.T, base string) map[string]dashResponse {
	t.Helper()
	page := dashGet(t, "GET", base+DashboardPath)
	if page.status != 200 {
		t.Fatalf("GET %s: got %d; want 200", DashboardPath, page.status)
	}
	out := map[string]dashResponse{"": page}
	for _, m := range assetRef.FindAllStringSubmatch(string(page.body), -1) {
		out[m[1]] = dashGet(t, "GET", base+strings.ReplaceAll(m[1], "&amp;", "&"))
	}
	if len(out) != 3 {
		t.Fatalf("the page names %d assets; want 2 (app.js and style.css): %v", len(out)-1, keys(out))
	}
	return out
}

func keys(m map[string]dashResponse) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func TestDashboardServesPageAndAssets(t *testing.T) {
	base := startDashboard(t)
	assets := dashboardAssets(t, base)
	wantType := map[string]string{"": "text/html; charset=utf-8", "app.js": "text/javascript; charset=utf-8", "style.css": "text/css; charset=utf-8"}
	total := 0
	for ref, r := range assets {
		name := ""
		if i := strings.Index(ref, "asset="); i >= 0 {
			name, _, _ = strings.Cut(ref[i+len("asset="):], "&")
		}
		if r.status != 200 {
			t.Errorf("%q: got status %d; want 200", ref, r.status)
		}
		if got := r.header.Get("Content-Type"); got != wantType[name] {
			t.Errorf("%q: got Content-Type %q; want %q", ref, got, wantType[name])
		}
		if got := r.header.Get("Content-Security-Policy"); got != dashboardCSP {
			t.Errorf("%q: got CSP %q; want %q", ref, got, dashboardCSP)
		}
		if got := r.header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%q: got X-Content-Type-Options %q; want nosniff", ref, got)
		}
		if r.header.Get("ETag") == "" {
			t.Errorf("%q: no ETag", ref)
		}
		if c := r.header.Values("Set-Cookie"); len(c) > 0 {
			t.Errorf("%q: sets cookies %v; want none", ref, c)
		}
		wantCache := immutableCacheControl // the page names each asset by its hash
		if name == "" {
			wantCache = pageCacheControl
		}
		if got := r.header.Get("Cache-Control"); got != wantCache {
			t.Errorf("%q: got Cache-Control %q; want %q", ref, got, wantCache)
		}
		// No third party: the only absolute URLs are the SVG namespace and
		// example.com (RFC 2606) in the sample command of the empty state.
		rest := strings.ReplaceAll(string(r.body), "http://www.w3.org/2000/svg", "")
		rest = strings.ReplaceAll(rest, "https://example.com/", "")
		if m := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`).FindString(rest); m != "" {
			t.Errorf("%q refers to another origin: %q", ref, m)
		}
		total += len(r.body)
	}
	// What a first visit downloads is the gzipped form (every browser
	// asks for it); the raw size bounds parsing. With the overview, goals
	// and heatmap panels: about 73 KB raw, 21 KB gzipped.
	if total > 80<<10 {
		t.Errorf("page plus assets: got %d bytes; want at most %d", total, 80<<10)
	}
	zipped := 0
	for _, name := range []string{"index.html", "app.js", "style.css"} {
		a := newDashboardAsset(name, "", nil)
		zipped += len(a.gzipped)
	}
	if zipped > 24<<10 {
		t.Errorf("page plus assets gzipped: got %d bytes; want at most %d", zipped, 24<<10)
	}
	t.Logf("page plus assets: %d bytes, %d gzipped", total, zipped)

	page := string(assets[""].body)
	if strings.Contains(page, "{{") {
		t.Errorf("the page still has a placeholder: %s", page)
	}
	// What CSP would block: inline scripts, inline style attributes, handlers.
	for _, bad := range []*regexp.Regexp{regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`), regexp.MustCompile(`\sstyle=`), regexp.MustCompile(`\son[a-z]+=`), regexp.MustCompile(`<style`)} {
		if m := bad.FindString(page); m != "" {
			t.Errorf("the page has inline code that CSP blocks: %q", m)
		}
	}
	for _, policy := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(dashboardCSP, policy) {
			t.Errorf("CSP %q lacks %q", dashboardCSP, policy)
		}
	}
	if strings.Contains(dashboardCSP, "unsafe") || strings.Contains(dashboardCSP, "*") {
		t.Errorf("CSP %q allows more than 'self'", dashboardCSP)
	}
}

func TestDashboardETagAnswers304(t *testing.T) {
	base := startDashboard(t)
	for ref, first := range dashboardAssets(t, base) {
		url := base + DashboardPath
		if ref != "" {
			url = base + ref
		}
		etag := first.header.Get("ETag")
		for _, inm := range []string{etag, `"nope", ` + etag, strings.TrimPrefix(etag, "W/"), "*"} {
			r := dashGet(t, "GET", url, "If-None-Match", inm)
			if r.status != 304 {
				t.Errorf("%q with If-None-Match %s: got %d; want 304", ref, inm, r.status)
			}
			if len(r.body) != 0 {
				t.Errorf("%q 304: got a %d-byte body; want none", ref, len(r.body))
			}
			if r.header.Get("ETag") != etag || r.header.Get("Cache-Control") == "" {
				t.Errorf("%q 304: got ETag %q Cache-Control %q; want %q and a lifetime", ref, r.header.Get("ETag"), r.header.Get("Cache-Control"), etag)
			}
		}
		if r := dashGet(t, "GET", url, "If-None-Match", `W/"0000"`); r.status != 200 || !bytes.Equal(r.body, first.body) {
			t.Errorf("%q with a stale ETag: got %d (%d bytes); want 200 and the file", ref, r.status, len(r.body))
		}
	}
}

func TestDashboardGzipAndHead(t *testing.T) {
	base := startDashboard(t)
	for ref, plain := range dashboardAssets(t, base) {
		url := base + DashboardPath
		if ref != "" {
			url = base + ref
		}
		r := dashGet(t, "GET", url, "Accept-Encoding", "gzip, br")
		if got := r.header.Get("Content-Encoding"); got != "gzip" {
			t.Fatalf("%q: got Content-Encoding %q; want gzip", ref, got)
		}
		zr, err := gzip.NewReader(bytes.NewReader(r.body))
		if err != nil {
			t.Fatalf("%q: not gzip: %v", ref, err)
		}
		unzipped, err := io.ReadAll(zr)
		if err != nil || !bytes.Equal(unzipped, plain.body) {
			t.Errorf("%q: gzip body differs from the plain one (err %v)", ref, err)
		}
		if r.header.Get("ETag") != plain.header.Get("ETag") || r.header.Get("Vary") != "Accept-Encoding" {
			t.Errorf("%q gzip: got ETag %q Vary %q; want %q and Accept-Encoding", ref, r.header.Get("ETag"), r.header.Get("Vary"), plain.header.Get("ETag"))
		}
		t.Logf("%q: %d bytes, %d gzipped", ref, len(plain.body), len(r.body))

		h := dashGet(t, "HEAD", url)
		if h.status != 200 || len(h.body) != 0 || h.header.Get("Content-Type") != plain.header.Get("Content-Type") {
			t.Errorf("HEAD %q: got %d, %d-byte body, type %q; want 200, no body, %q", ref, h.status, len(h.body), h.header.Get("Content-Type"), plain.header.Get("Content-Type"))
		}
	}
}

func TestDashboardRefusals(t *testing.T) {
	base := startDashboard(t)
	if r := dashGet(t, "POST", base+DashboardPath); r.status != 405 || r.header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: got %d Allow %q; want 405 and GET, HEAD", r.status, r.header.Get("Allow"))
	}
	if r := dashGet(t, "GET", base+DashboardPath+"?asset=../dashboard.go"); r.status != 404 {
		t.Errorf("unknown asset: got %d; want 404", r.status)
	}
	// An asset asked for by an older hash is served, but not cached for good.
	r := dashGet(t, "GET", base+DashboardPath+"?asset=app.js&v=old")
	if r.status != 200 || r.header.Get("Cache-Control") != staleCacheControl {
		t.Errorf("app.js by an old hash: got %d Cache-Control %q; want 200 and %q", r.status, r.header.Get("Cache-Control"), staleCacheControl)
	}
}

func TestEtagMatches(t *testing.T) {
	for _, tc := range []struct {
		header string
		want   bool
	}{
		{`W/"abc"`, true}, {`"abc"`, true}, {`"x", W/"abc"`, true}, {`*`, true},
		{``, false}, {`"ab"`, false}, {`W/"abcd"`, false}, {`abc`, false},
	} {
		if got := etagMatches([]byte(tc.header), `W/"abc"`); got != tc.want {
			t.Errorf("etagMatches(%q): got %v; want %v", tc.header, got, tc.want)
		}
	}
}

func BenchmarkDashboardPage(b *testing.B) {
	h := DashboardHandler()
	var ctx fasthttp.RequestCtx
	b.ReportAllocs()
	for b.Loop() {
		ctx.Request.Reset()
		ctx.Response.Reset()
		ctx.Request.SetRequestURI(DashboardPath)
		ctx.Request.Header.Set("Accept-Encoding", "gzip")
		h(&ctx)
		if ctx.Response.StatusCode() != 200 {
			b.Fatalf("got %d; want 200", ctx.Response.StatusCode())
		}
	}
}
