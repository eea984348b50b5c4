package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// NginxRoute is one entry of nginx's redirect map: a request path and the
// Location it answers with.
type NginxRoute struct {
	Path     string // starts with "/"
	Location string
}

// NginxConfig is what RenderNginxConfig needs: everything nginx writes
// lives under Dir, and it listens on 127.0.0.1:Port only.
type NginxConfig struct {
	Dir          string // absolute; pid, error log and every *_temp_path go here
	Port         int
	Routes       []NginxRoute
	CacheControl string // sent with every 302, like the node's redirects
	// AsRoot adds `user root;`: nginx started by root otherwise switches
	// its worker to "nobody", whose group differs between distributions.
	// Leave it off for an unprivileged start, where nginx refuses the
	// directive's purpose anyway.
	AsRoot bool
}

// nginxTempDirs are the *_temp_path directives of the http core and of the
// modules Debian builds in; each gets a folder under Dir so nginx never
// touches /var/lib/nginx.
var nginxTempDirs = []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"}

// RenderNginxConfig returns an nginx.conf for a one-worker redirect
// server: `map $uri $dest` holds the routes; a hit answers 302 with
// Location and Cache-Control, a miss 404. Keep-alive connections are
// never closed by request count (nginx's default closes each after 1,000
// requests, which the other servers do not do).
func RenderNginxConfig(c NginxConfig) ([]byte, error) {
	if !filepath.IsAbs(c.Dir) {
		return nil, fmt.Errorf("cannot render nginx config: Dir %q is not absolute", c.Dir)
	}
	if c.Port <= 0 || c.Port > 65535 {
		return nil, fmt.Errorf("cannot render nginx config: bad port %d", c.Port)
	}
	if strings.Contains(c.CacheControl, "$") {
		return nil, fmt.Errorf("cannot render nginx config: Cache-Control %q holds a $", c.CacheControl)
	}
	var b strings.Builder
	if c.AsRoot {
		b.WriteString("user root;\n")
	}
	fmt.Fprintf(&b, "worker_processes 1;\ndaemon off;\nmaster_process on;\npid %s;\nerror_log %s warn;\n",
		nginxQuote(filepath.Join(c.Dir, "nginx.pid")), nginxQuote(filepath.Join(c.Dir, "error.log")))
	b.WriteString("events {\n    worker_connections 1024;\n}\n")
	b.WriteString("http {\n    access_log off;\n    server_tokens off;\n")
	for _, d := range nginxTempDirs {
		fmt.Fprintf(&b, "    %s_temp_path %s;\n", d, nginxQuote(filepath.Join(c.Dir, d+"_temp")))
	}
	b.WriteString("    keepalive_requests 1000000000;\n    keepalive_timeout 300s;\n")
	fmt.Fprintf(&b, "    map_hash_max_size %d;\n    map_hash_bucket_size 128;\n", mapHashSize(len(c.Routes)))
	b.WriteString("    map $uri $dest {\n        default \"\";\n")
	// A map's string keys match case-insensitively, and short codes are
	// case-sensitive: paths that differ only in case become exact,
	// case-sensitive regexes (nginx refuses the duplicate keys otherwise).
	folded := make(map[string]int, len(c.Routes))
	for _, r := range c.Routes {
		folded[strings.ToLower(r.Path)]++
	}
	for _, r := range c.Routes {
		if !strings.HasPrefix(r.Path, "/") || r.Location == "" || strings.Contains(r.Path+r.Location, "$") {
			return nil, fmt.Errorf("cannot render nginx config: route %q -> %q needs a path starting with / and a location, neither with a $", r.Path, r.Location)
		}
		key := r.Path
		if folded[strings.ToLower(r.Path)] > 1 {
			key = "~^" + regexp.QuoteMeta(r.Path) + "$"
		}
		fmt.Fprintf(&b, "        %s %s;\n", nginxQuote(key), nginxQuote(r.Location))
	}
	b.WriteString("    }\n")
	fmt.Fprintf(&b, "    server {\n        listen 127.0.0.1:%d;\n        location / {\n", c.Port)
	b.WriteString("            if ($dest = \"\") {\n                return 404;\n            }\n")
	fmt.Fprintf(&b, "            add_header Cache-Control %s;\n", nginxQuote(c.CacheControl))
	b.WriteString("            return 302 $dest;\n        }\n    }\n}\n")
	return []byte(b.String()), nil
}

// mapHashSize is a map_hash_max_size that fits n keys (nginx refuses to
// start when the map does not fit).
func mapHashSize(n int) int {
	size := 2048
	for size < 2*n {
		size *= 2
	}
	return size
}

// nginxQuote double-quotes s for an nginx config; nginx unescapes \" and
// \\ inside quotes. Variables ($...) stay variables in a quoted string,
// so RenderNginxConfig refuses routes with a "$".
func nginxQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}

// NginxOptions describes an nginx child.
type NginxOptions struct {
	Binary       string // empty means nginx on PATH
	Dir          string // fresh, caller-owned folder for the config, logs and temp files
	Routes       []NginxRoute
	CacheControl string
	CPUs         string    // taskset CPU list, or empty
	Echo         io.Writer // optional copy of its output
	StartTimeout time.Duration
}

// Nginx is a running nginx master (and its one worker) in its own process
// group.
type Nginx struct {
	*Child
	Addr     string // 127.0.0.1:PORT
	ConfPath string
}

// maxPortAttempts bounds the retries when a freed port was taken before
// nginx could bind it.
const maxPortAttempts = 5

// FindNginx returns the nginx binary, or an error that says which package
// to install.
func FindNginx(binary string) (string, error) {
	if binary == "" {
		binary = "nginx"
	}
	p, err := lookSbin(binary)
	if err != nil {
		return "", fmt.Errorf("cannot find %s: install the nginx-light package (Debian)", binary)
	}
	return p, nil
}

// StartNginx writes the config into Dir, starts nginx in the foreground
// (`nginx -p DIR -c DIR/nginx.conf -e DIR/error.log`) on a free loopback
// port and waits until it answers the first route with 302 (or any path
// with 404 when there are no routes). A port taken between the harness
// freeing it and nginx binding it is retried with another one. On error
// nothing is left running.
func StartNginx(ctx context.Context, o NginxOptions) (*Nginx, error) {
	bin, err := FindNginx(o.Binary)
	if err != nil {
		return nil, err
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 30 * time.Second
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("cannot use nginx dir %q: %w", o.Dir, err)
	}
	for _, d := range nginxTempDirs {
		if err := os.MkdirAll(filepath.Join(dir, d+"_temp"), 0o755); err != nil {
			return nil, fmt.Errorf("cannot create nginx temp dir: %w", err)
		}
	}
	var lastErr error
	for attempt := 0; attempt < maxPortAttempts; attempt++ {
		port, err := FreeLoopbackPort()
		if err != nil {
			return nil, err
		}
		conf, err := RenderNginxConfig(NginxConfig{Dir: dir, Port: port, Routes: o.Routes, CacheControl: o.CacheControl, AsRoot: os.Geteuid() == 0})
		if err != nil {
			return nil, err
		}
		confPath := filepath.Join(dir, "nginx.conf")
		if err := os.WriteFile(confPath, conf, 0o644); err != nil {
			return nil, fmt.Errorf("cannot write nginx config: %w", err)
		}
		child, err := StartChild(ChildConfig{
			Name: "nginx", Path: bin,
			Args: []string{"-p", dir, "-c", confPath, "-e", filepath.Join(dir, "error.log")},
			Echo: o.Echo, CPUs: o.CPUs, StopGrace: 5 * time.Second,
		})
		if err != nil {
			return nil, err
		}
		n := &Nginx{Child: child, Addr: "127.0.0.1:" + strconv.Itoa(port), ConfPath: confPath}
		err = n.waitServing(ctx, o)
		if err == nil {
			return n, nil
		}
		child.Stop()
		lastErr = err
		if !n.portTaken(dir) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("cannot start nginx after %d ports: %w", maxPortAttempts, lastErr)
}

func (n *Nginx) waitServing(ctx context.Context, o NginxOptions) error {
	ctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()
	path, want := "/waymark-bench-probe", http.StatusNotFound
	if len(o.Routes) > 0 {
		path, want = o.Routes[0].Path, http.StatusFound
	}
	client := &http.Client{
		Timeout:       2 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	defer client.CloseIdleConnections()
	var last string
	for {
		if IsClosed(n.Exited()) {
			return fmt.Errorf("nginx exited (%v)%s", n.ExitErr(), n.tailNote())
		}
		resp, err := client.Get("http://" + n.Addr + path)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == want {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cannot see nginx answer %s with %d (last: %s): %w%s", path, want, last, context.Cause(ctx), n.tailNote())
		case <-time.After(pollInterval):
		}
	}
}

// portTaken reports whether nginx failed because its port was in use.
func (n *Nginx) portTaken(dir string) bool {
	b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
	text := string(b) + strings.Join(n.Tail(), "\n")
	return strings.Contains(text, "Address already in use")
}

// errNginxPid is returned by CheckPidFile when nginx's pid file names
// another process than the one started.
var errNginxPid = errors.New("nginx pid file names another process")

// CheckPidFile reads nginx's pid file and checks it names the master the
// harness started, the process Stop signals.
func (n *Nginx) CheckPidFile() error {
	dir := filepath.Dir(n.ConfPath)
	b, err := os.ReadFile(filepath.Join(dir, "nginx.pid"))
	if err != nil {
		return fmt.Errorf("cannot read nginx pid file: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid != n.Pid() {
		return fmt.Errorf("%w: %q, started %d", errNginxPid, strings.TrimSpace(string(b)), n.Pid())
	}
	return nil
}
