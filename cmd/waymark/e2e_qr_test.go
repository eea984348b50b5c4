package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestE2EQRCode fetches a link's QR code from a real node as PNG and as
// SVG and reads both back with a real decoder (zbarimg, Debian's
// zbar-tools; the SVG rasterised by headless Chromium first): each must
// give the link's short URL. Bad options get a problem and no image.
func TestE2EQRCode(t *testing.T) {
	zbarimg, err := exec.LookPath("zbarimg")
	if err != nil {
		requireTool(t, "zbarimg is not installed (%v); on Debian: apt-get install zbar-tools", err)
	}
	dir := t.TempDir()
	p := startNode(t, dir, "--dev", "--http-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0")
	base := "http://" + p.http
	waitFor(t, "readyz", 30*time.Second, func() bool { return do(t, "GET", base+"/readyz", "", "").status == 200 })
	var key string
	waitFor(t, "dev-api-key", 30*time.Second, func() bool { key = readKeyMaybe(filepath.Join(dir, "dev-api-key")); return key != "" })

	r := do(t, "POST", base+"/v1/links", key, `{"url":"https://example.com/spring-sale?ref=poster"}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	code := r.json(t)["code"].(string)
	shortURL := base + "/" + code
	decode := func(t *testing.T, file string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, zbarimg, "--raw", "-q", file).Output()
		if err != nil {
			t.Fatalf("zbarimg %s: %v", file, err)
		}
		return strings.TrimSpace(string(out))
	}

	for _, ecc := range []string{"L", "M", "Q", "H"} {
		r := do(t, "GET", base+"/v1/links/"+code+"/qr?format=png&size=300&margin=2&ecc="+ecc, key, "")
		if r.status != 200 || r.header.Get("Content-Type") != "image/png" || !bytes.HasPrefix(r.body, []byte("\x89PNG\r\n\x1a\n")) {
			t.Fatalf("png ecc %s: %d %q %.80q", ecc, r.status, r.header.Get("Content-Type"), r.body)
		}
		file := filepath.Join(dir, "qr-"+ecc+".png")
		if err := os.WriteFile(file, r.body, 0o600); err != nil {
			t.Fatal(err)
		}
		if got := decode(t, file); got != shortURL {
			t.Fatalf("png ecc %s decodes to %q; want %q", ecc, got, shortURL)
		}
	}

	r = do(t, "GET", base+"/v1/links/"+code+"/qr?format=svg&size=400", key, "")
	if r.status != 200 || r.header.Get("Content-Type") != "image/svg+xml" || !bytes.HasPrefix(r.body, []byte("<svg ")) {
		t.Fatalf("svg: %d %q %.80q", r.status, r.header.Get("Content-Type"), r.body)
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		requireTool(t, "headless Chromium is not installed (%v); on Debian: apt-get install chromium, or run .ci/install-browser.sh", err)
	}
	svgFile, shot := filepath.Join(dir, "qr.svg"), filepath.Join(dir, "qr-svg.png")
	if err := os.WriteFile(svgFile, r.body, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromiumPath, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--user-data-dir="+filepath.Join(dir, "chromium"), "--hide-scrollbars", "--window-size=400,400", "--screenshot="+shot, "file://"+svgFile)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium screenshot of the SVG: %v\n%s", err, out)
	}
	if got := decode(t, shot); got != shortURL {
		t.Fatalf("svg decodes to %q; want %q", got, shortURL)
	}

	// Refusals: a problem, never an image.
	for _, c := range []struct {
		query  string
		key    string
		status int
	}{
		{"?format=gif", key, 400},
		{"?size=10", key, 400},
		{"?size=99999", key, 400},
		{"?size=x", key, 400},
		{"?margin=-1", key, 400},
		{"?ecc=Z", key, 400},
		{"?size=40&margin=16", key, 400}, // too small for the code with that margin
		{"", "", 401},
	} {
		r := do(t, "GET", base+"/v1/links/"+code+"/qr"+c.query, c.key, "")
		if r.status != c.status || !strings.HasPrefix(r.header.Get("Content-Type"), "application/problem+json") {
			t.Errorf("qr%s: got %d %q; want %d problem+json", c.query, r.status, r.header.Get("Content-Type"), c.status)
		}
	}
	if r := do(t, "GET", base+"/v1/links/zzzzzzz/qr", key, ""); r.status != 404 {
		t.Errorf("qr of an unknown code: got %d; want 404", r.status)
	}
	if r := do(t, "POST", base+"/v1/links/"+code+"/qr", key, ""); r.status != 405 || r.header.Get("Allow") != "GET" {
		t.Errorf("POST qr: got %d Allow %q; want 405 GET", r.status, r.header.Get("Allow"))
	}
}
