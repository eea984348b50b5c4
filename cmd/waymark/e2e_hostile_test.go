package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// metricValue reads one sample from a node's /metrics (0 when absent).
func metricValue(t *testing.T, p *proc, sample string) float64 {
	t.Helper()
	r := do(t, "GET", "http://"+p.http+"/metrics", "", "")
	for _, line := range strings.Split(string(r.body), "\n") {
		if rest, ok := strings.CutPrefix(line, sample+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("metric %s: %q", sample, line)
			}
			return v
		}
	}
	return 0
}

// leaderLookups is how many read-your-writes lookups a leader has
// answered, codes and API keys together, by its own metric.
func leaderLookups(t *testing.T, leader *proc) float64 {
	return metricValue(t, leader, `waymark_internal_lookups_total{kind="link"}`) +
		metricValue(t, leader, `waymark_internal_lookups_total{kind="owner"}`)
}

// TestE2ELeaderLookupsBounded sends an edge random alias-shaped paths and
// random bearer tokens from one client. Each is a local miss that may be
// a fresh code or key, but together they cost the leader at most the
// client's lookup budget (a burst of 20, then 5 a second: README,
// "Hostile traffic"), and real codes keep redirecting.
func TestE2ELeaderLookupsBounded(t *testing.T) {
	c := newCluster(t)
	v1, e1, key := c.voterAndEdge("us", "alice")
	r := do(t, "POST", "http://"+v1.http+"/v1/links", key, `{"url":"https://dest.example/real","alias":"real-link"}`)
	if r.status != 201 {
		t.Fatalf("create: got %d %s", r.status, r.body)
	}
	waitFor(t, "the real link on the edge", 10*time.Second, func() bool {
		return resolves(t, e1, "real-link", "https://dest.example/real")
	})
	waitFor(t, "the key on the edge", 10*time.Second, func() bool {
		return do(t, "GET", "http://"+e1.http+"/v1/links", key, "").status == 200
	})

	rng := rand.New(rand.NewSource(1))
	letters := "abcdefghijklmnopqrstuvwxyz0123456789"
	random := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = letters[rng.Intn(len(letters))]
		}
		return string(b)
	}
	const n = 400
	before := leaderLookups(t, v1)
	t0 := time.Now()
	for i := 0; i < n; i++ {
		if r := do(t, "GET", "http://"+e1.http+"/x-"+random(10), "", ""); r.status != 404 {
			t.Fatalf("random alias: got %d; want 404", r.status)
		}
		if r := do(t, "GET", "http://"+e1.http+"/v1/links", "wm_"+random(48), ""); r.status != 401 {
			t.Fatalf("random token: got %d; want 401", r.status)
		}
	}
	elapsed := time.Since(t0)
	// Lookups are counted by the leader as they arrive; the last ones are
	// answered before their request returns.
	got := leaderLookups(t, v1) - before
	bound := 20 + 5*elapsed.Seconds() + 1
	t.Logf("%d random codes and %d random tokens in %v cost the leader %.0f lookups (bound %.0f)", n, n, elapsed.Round(time.Millisecond), got, bound)
	if got > bound {
		t.Fatalf("%d random misses from one client cost the leader %.0f lookups; want at most %.0f", 2*n, got, bound)
	}

	// Real codes and keys still work, old and new.
	if !resolves(t, e1, "real-link", "https://dest.example/real") {
		t.Fatal("the real link stopped redirecting on the edge")
	}
	r = do(t, "POST", "http://"+v1.http+"/v1/links", key, `{"url":"https://dest.example/fresh"}`)
	if r.status != 201 {
		t.Fatalf("create: got %d %s", r.status, r.body)
	}
	fresh := r.json(t)["code"].(string)
	waitFor(t, "a fresh link on the edge", 10*time.Second, func() bool {
		return resolves(t, e1, fresh, "https://dest.example/fresh")
	})
	if r := do(t, "GET", "http://"+e1.http+"/v1/links", key, ""); r.status != 200 {
		t.Fatalf("real key on the edge after the flood: got %d %s", r.status, r.body)
	}
}

// rawExchange writes req on a fresh connection and reads one response,
// with a deadline, so a server that waits for a body it should refuse
// fails the test instead of hanging it.
func rawExchange(t *testing.T, addr, req string) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to %q: %v", strings.SplitN(req, "\r\n", 2)[0], err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

type problemJSON struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail"`
	Instance string `json:"instance"`
}

// expectProblem checks an RFC 9457 answer: the media type, and type,
// title and status as the problem catalogue defines them.
func expectProblem(t *testing.T, what string, status int, contentType string, body []byte, wantStatus int, wantType, wantTitle string) problemJSON {
	t.Helper()
	var p problemJSON
	if err := json.Unmarshal(body, &p); err != nil || contentType != "application/problem+json" {
		t.Fatalf("%s: got %d %q %s; want an application/problem+json body", what, status, contentType, body)
	}
	if status != wantStatus || p.Status != wantStatus || p.Type != "/problems/"+wantType || p.Title != wantTitle {
		t.Fatalf("%s: got %d %+v; want %d %s %q", what, status, p, wantStatus, wantType, wantTitle)
	}
	return p
}

// TestE2EHostileRequests drives a --dev node (every role, so the
// aggregator's 16 MiB segment route is open) with requests an attacker or
// a broken client sends: bodies far past a route's limit announced in the
// headers (refused before a byte of body is sent), oversized and
// malformed headers, a 4,000-character owner name, an unbounded tail.
// Every error is an RFC 9457 problem.
func TestE2EHostileRequests(t *testing.T) {
	dir := t.TempDir()
	p := startNode(t, dir, "--dev", "--http-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0")
	waitFor(t, "ready", 30*time.Second, func() bool { return ready(t, p) })

	// 16 MB announced, nothing sent: each route answers 413 at once.
	for _, path := range []string{"/api/event", "/v1/links", "/abcdefg", "/internal/v1/apply", "/api/v2/query", "/internal/v1/membership"} {
		resp, body := rawExchange(t, p.http, "POST "+path+" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 16000000\r\n\r\n")
		pr := expectProblem(t, "POST "+path+" announcing 16 MB", resp.StatusCode, resp.Header.Get("Content-Type"), body, 413, "payload-too-large", "Request body too large")
		if pr.Instance != path {
			t.Errorf("POST %s: instance %q; want the path", path, pr.Instance)
		}
	}
	// A chunked body is cut off at the limit as it is read.
	chunk := strings.Repeat("a", 32<<10)
	req := "POST /api/event HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
	for i := 0; i < 4; i++ {
		req += fmt.Sprintf("%x\r\n%s\r\n", len(chunk), chunk)
	}
	resp, body := rawExchange(t, p.http, req+"0\r\n\r\n")
	expectProblem(t, "chunked 128 KiB event", resp.StatusCode, resp.Header.Get("Content-Type"), body, 413, "payload-too-large", "Request body too large")

	// fasthttp's own errors.
	resp, body = rawExchange(t, p.http, "GET /abcdefg HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("b", 8<<10)+"\r\n\r\n")
	expectProblem(t, "8 KiB header", resp.StatusCode, resp.Header.Get("Content-Type"), body, 431, "header-too-large", "Request header too large")
	resp, body = rawExchange(t, p.http, "GET /abcdefg HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n")
	expectProblem(t, "malformed request", resp.StatusCode, resp.Header.Get("Content-Type"), body, 400, "invalid-request", "Invalid request")

	// Internal endpoints from a client that is not a node (plain HTTP,
	// no certificate of the cluster CA, no token).
	r := do(t, "GET", "http://"+p.http+"/internal/v1/status", "", "")
	expectProblem(t, "internal status from a stranger", r.status, r.header.Get("Content-Type"), r.body, 403, "forbidden", "Forbidden")

	// The operator API.
	admin := "http://" + p.admin
	token := readKey(t, filepath.Join(dir, "operator-token"))
	r = do(t, "POST", admin+"/v1/owners", token, `{"name":"`+strings.Repeat("n", 4000)+`"}`)
	pr := expectProblem(t, "4,000-character owner name", r.status, r.header.Get("Content-Type"), r.body, 400, "invalid-request", "Invalid request")
	if pr.Instance != "/v1/owners" {
		t.Errorf("owner problem instance %q; want /v1/owners", pr.Instance)
	}
	r = do(t, "POST", admin+"/v1/owners", token, `{"name":"bad\u0000name"}`)
	expectProblem(t, "owner name with NUL", r.status, r.header.Get("Content-Type"), r.body, 400, "invalid-request", "Invalid request")
	r = do(t, "POST", admin+"/v1/owners", token, `{"name":"  ok name  "}`)
	if r.status != 201 || r.json(t)["name"] != "ok name" {
		t.Fatalf("a fine owner name: got %d %s", r.status, r.body)
	}
	r = do(t, "GET", admin+"/v1/nope", token, "")
	expectProblem(t, "unknown operator path", r.status, r.header.Get("Content-Type"), r.body, 404, "not-found", "Not found")
	r = do(t, "GET", admin+"/v1/status", "wrong", "")
	expectProblem(t, "wrong operator token", r.status, r.header.Get("Content-Type"), r.body, 401, "unauthorized", "Unauthorized")
	r = do(t, "GET", admin+"/v1/events/tail?n=1000000000", token, "")
	expectProblem(t, "tail -n 1e9", r.status, r.header.Get("Content-Type"), r.body, 400, "invalid-request", "Invalid request")
	env := []string{"WAYMARK_ADMIN_ADDR=" + p.admin, "WAYMARK_TOKEN=" + token}
	if _, errOut, code := runCLI(t, env, "events", "tail", "-n", "1000000"); code != 2 || !strings.Contains(errOut, "-n") {
		t.Fatalf("events tail -n 1000000: exit %d %q; want a usage error", code, errOut)
	}
	if _, _, code := runCLI(t, env, "events", "tail", "-n", "5"); code != 0 {
		t.Fatalf("events tail -n 5: exit %d", code)
	}
}

// TestE2EOutOfDescriptors runs a --dev node with 64 file descriptors and
// holds connections open until its accepts fail with EMFILE. The node must
// not stop serving for good: once the connections are gone it accepts
// again by itself, reports ready and redirects.
func TestE2EOutOfDescriptors(t *testing.T) {
	dir := t.TempDir()
	p := startNodeWith(t, dir, func(bin string, args ...string) *exec.Cmd {
		// The shell lowers soft and hard limit; Go raises the soft limit
		// only up to the hard one.
		return exec.Command("sh", append([]string{"-c", `ulimit -n 64 && exec "$0" "$@"`, bin}, args...)...)
	}, "--dev", "--http-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0")
	waitFor(t, "ready", 30*time.Second, func() bool { return ready(t, p) })
	var key string
	waitFor(t, "dev key", 30*time.Second, func() bool { key = readKeyMaybe(filepath.Join(dir, "dev-api-key")); return key != "" })
	r := do(t, "POST", "http://"+p.http+"/v1/links", key, `{"url":"https://dest.example/fd","alias":"fd-link"}`)
	if r.status != 201 {
		t.Fatalf("create: got %d %s", r.status, r.body)
	}

	// Hold connections (each costs the node a descriptor once accepted)
	// until the node says its accepts fail.
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	exhausted := func() bool { return strings.Contains(p.logs(), "too many open files") }
	for i := 0; i < 200 && !exhausted(); i++ {
		c, err := net.DialTimeout("tcp", p.http, time.Second)
		if err != nil {
			break // the backlog is full too
		}
		held = append(held, c)
		if i > 40 {
			waitForQuiet(20*time.Millisecond, exhausted)
		}
	}
	waitFor(t, "accept to fail with EMFILE", 10*time.Second, exhausted)
	t.Logf("accepts failed after %d held connections", len(held))
	select {
	case <-p.done:
		t.Fatalf("node exited when it ran out of descriptors:\n%s", p.logs())
	default:
	}
	for _, c := range held {
		c.Close()
	}
	held = nil

	// Back by itself: ready, redirecting, and its log says so. Fresh
	// connections only: a pooled one accepted before would prove nothing.
	fresh := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	waitFor(t, "ready again after descriptors are free", 15*time.Second, func() bool {
		resp, err := fresh.Get("http://" + p.http + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	resp, err := fresh.Get("http://" + p.http + "/fd-link")
	if err != nil || resp.StatusCode != 302 || resp.Header.Get("Location") != "https://dest.example/fd" {
		t.Fatalf("the link does not redirect after the node recovered: %v %v", resp, err)
	}
	resp.Body.Close()
	if !strings.Contains(p.logs(), "accepting connections again") {
		t.Errorf("no recovery line in the log")
	}
	p.stop(t)
}

// waitForQuiet polls cond for at most d, without failing.
func waitForQuiet(d time.Duration, cond func() bool) {
	deadline := time.Now().Add(d)
	for !cond() && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
}
