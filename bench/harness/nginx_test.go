package harness

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRenderNginxConfig(t *testing.T) {
	dir := t.TempDir()
	conf, err := RenderNginxConfig(NginxConfig{
		Dir: dir, Port: 18080, CacheControl: "private, max-age=60",
		Routes: []NginxRoute{{"/abc1234", "https://example.com/p/0"}, {"/q\"x", `https://example.com/a\b`}},
	})
	if err != nil {
		t.Fatalf("RenderNginxConfig: %v", err)
	}
	text := string(conf)
	for _, want := range []string{
		"worker_processes 1;",
		"daemon off;",
		`pid "` + filepath.Join(dir, "nginx.pid") + `";`,
		`error_log "` + filepath.Join(dir, "error.log") + `" warn;`,
		`client_body_temp_path "` + filepath.Join(dir, "client_body_temp") + `";`,
		`proxy_temp_path "` + filepath.Join(dir, "proxy_temp") + `";`,
		`fastcgi_temp_path "`, `uwsgi_temp_path "`, `scgi_temp_path "`,
		"keepalive_requests 1000000000;",
		"map $uri $dest {",
		`"/abc1234" "https://example.com/p/0";`,
		`"/q\"x" "https://example.com/a\\b";`,
		"listen 127.0.0.1:18080;",
		`add_header Cache-Control "private, max-age=60";`,
		"return 302 $dest;",
		"return 404;",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("config lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "user ") {
		t.Errorf("config has a user directive without AsRoot:\n%s", text)
	}
	asRoot, _ := RenderNginxConfig(NginxConfig{Dir: dir, Port: 1, AsRoot: true})
	if !strings.HasPrefix(string(asRoot), "user root;\n") {
		t.Errorf("AsRoot config does not start with `user root;`:\n%s", asRoot)
	}
	for _, bad := range []NginxConfig{
		{Dir: "relative", Port: 1},
		{Dir: dir, Port: 0},
		{Dir: dir, Port: 1, Routes: []NginxRoute{{"nopath", "https://x/"}}},
		{Dir: dir, Port: 1, Routes: []NginxRoute{{"/a", "https://x/$host"}}},
		{Dir: dir, Port: 1, CacheControl: "$x"},
	} {
		if _, err := RenderNginxConfig(bad); err == nil {
			t.Errorf("RenderNginxConfig(%+v) succeeded; want an error", bad)
		}
	}
	if got := mapHashSize(100_000); got < 200_000 {
		t.Errorf("mapHashSize(100000) = %d; want at least 200000", got)
	}
}

// requireTool fails the test when a program the benchmarks start is
// missing, naming the package to install; only -short skips.
func requireTool(t *testing.T, find func() error) {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping: starts a real server (-short)")
	}
	if err := find(); err != nil {
		t.Fatal(err)
	}
}

func TestStartNginxAnswersACode(t *testing.T) {
	requireTool(t, func() error { _, err := FindNginx(""); return err })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := StartNginx(ctx, NginxOptions{
		Dir: t.TempDir(),
		Routes: []NginxRoute{{"/abc1234", "https://example.com/p/0"}, {"/zz99", "https://example.com/p/1"},
			// Codes are case-sensitive; nginx's map keys are not.
			{"/AbC1234", "https://example.com/p/2"}},
		CacheControl: "private, max-age=60",
	})
	if err != nil {
		t.Fatalf("StartNginx: %v", err)
	}
	defer n.Stop()
	if err := n.CheckPidFile(); err != nil {
		t.Error(err)
	}
	client := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get("http://" + n.Addr + "/zz99")
	if err != nil {
		t.Fatalf("GET /zz99: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "https://example.com/p/1" || resp.Header.Get("Cache-Control") != "private, max-age=60" {
		t.Errorf("GET /zz99: %s, Location %q, Cache-Control %q; want 302 to https://example.com/p/1, private, max-age=60",
			resp.Status, resp.Header.Get("Location"), resp.Header.Get("Cache-Control"))
	}
	for path, want := range map[string]string{"/abc1234": "https://example.com/p/0", "/AbC1234": "https://example.com/p/2"} {
		resp, err := client.Get("http://" + n.Addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != want {
			t.Errorf("GET %s: %s, Location %q; want 302 to %s", path, resp.Status, resp.Header.Get("Location"), want)
		}
	}
	resp, err = client.Get("http://" + n.Addr + "/ABC1234")
	if err != nil {
		t.Fatalf("GET /ABC1234: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /ABC1234: %s; want 404 (no such code in that case)", resp.Status)
	}
	resp, err = client.Get("http://" + n.Addr + "/nope")
	if err != nil {
		t.Fatalf("GET /nope: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nope: %s; want 404", resp.Status)
	}
	pid := n.Pid()
	if err := n.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if !ProcessGone(pid) {
		t.Errorf("nginx master %d still exists after Stop", pid)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(n.ConfPath), "error.log")); err != nil {
		t.Errorf("no error log in the temp dir: %v", err)
	}
}
