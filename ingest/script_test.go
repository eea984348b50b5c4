package ingest

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestScriptUnder2KBGzipped holds the tracker to the size bound,
// gzipped as ScriptHandler serves it, and checks that the minified source
// still has each behaviour the browser tests exercise (and no storage).
func TestScriptUnder2KBGzipped(t *testing.T) {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(trackerJS)
	zw.Close()
	if buf.Len() >= maxScriptGzip {
		t.Fatalf("s.js is %d bytes gzipped; want under %d", buf.Len(), maxScriptGzip)
	}
	t.Logf("s.js: %d bytes, %d gzipped", len(trackerJS), buf.Len())
	for _, must := range []string{"sendBeacon", "pushState", "replaceState", "popstate", "hashchange",
		"visibilitychange", "prerenderingchange", "prerendering", "persisted", "hasFocus", "webdriver", "__waymark",
		"data-domain", "data-api", "data-local", "data-hash", "data-outbound-links", "data-file-downloads",
		"file-types", "add-file-types", "'Outbound Link: Click'", "'File Download'", "'engagement'", "w.waymark"} {
		if !bytes.Contains(trackerJS, []byte(must)) {
			t.Errorf("s.js lacks %q", must)
		}
	}
	for _, never := range []string{"cookie", "localStorage", "sessionStorage", "indexedDB"} {
		if bytes.Contains(trackerJS, []byte(never)) {
			t.Errorf("s.js mentions %q", never)
		}
	}
}

func TestScriptHandler(t *testing.T) {
	p := openTestPipeline(t, nil)
	url := serve(t, p.ScriptHandler()) + "/s.js"

	tr := &http.Transport{DisableCompression: true}
	client := &http.Client{Transport: tr}
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	etag := resp.Header.Get("ETag")
	if resp.StatusCode != 200 || etag == "" || !strings.Contains(resp.Header.Get("Cache-Control"), "max-age=") ||
		resp.Header.Get("Content-Encoding") != "gzip" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/javascript") {
		t.Fatalf("got %d %v; want 200 gzipped JavaScript with ETag and Cache-Control", resp.StatusCode, resp.Header)
	}
	if len(body) >= maxScriptGzip {
		t.Errorf("served %d gzipped bytes; want under %d", len(body), maxScriptGzip)
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(zr)
	if !bytes.Equal(plain, trackerJS) {
		t.Errorf("gzipped body does not decompress to s.js")
	}

	req, _ = http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("If-None-Match", `"other", `+etag)
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match: got %d; want 304", resp.StatusCode)
	}
	if resp.Header.Get("Set-Cookie") != "" {
		t.Errorf("script response sets a cookie")
	}
}
