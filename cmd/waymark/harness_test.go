package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binPath is the waymark binary built once for every end-to-end test.
var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "waymark-e2e-bin")
	if err != nil {
		panic(err)
	}
	binPath = filepath.Join(dir, "waymark")
	build := exec.Command("go", "build", "-o", binPath, ".")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		panic("cannot build waymark: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is one real waymark node process.
type proc struct {
	t       *testing.T
	cmd     *exec.Cmd
	dataDir string
	http    string // bound public address
	admin   string // bound admin address
	gossip  string // bound gossip address
	raft    string // bound raft address
	done    chan struct{}
	mu      sync.Mutex
	log     bytes.Buffer
}

// startNode starts `waymark node` with args plus JSON logging and waits
// until its listeners are bound (read from its log, never guessed).
func startNode(t *testing.T, dataDir string, args ...string) *proc {
	t.Helper()
	return startNodeWith(t, dataDir, exec.Command, args...)
}

// startNodeWith is startNode with the command built by command (e.g.
// through a shell that lowers a limit first).
func startNodeWith(t *testing.T, dataDir string, command func(bin string, args ...string) *exec.Cmd, args ...string) *proc {
	t.Helper()
	full := append([]string{"node", "--data-dir", dataDir, "--log-format", "json"}, args...)
	p := &proc{t: t, cmd: command(binPath, full...), dataDir: dataDir, done: make(chan struct{})}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout = io.Discard
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("cannot start waymark: %v", err)
	}
	t.Cleanup(p.kill)
	bound := make(chan struct{})
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var once sync.Once
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.log.WriteString(line + "\n")
			p.mu.Unlock()
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) != nil {
				continue
			}
			switch rec["msg"] {
			case "raft listening":
				p.mu.Lock()
				p.raft, _ = rec["addr"].(string)
				p.mu.Unlock()
			case "gossip listening":
				p.mu.Lock()
				p.gossip, _ = rec["addr"].(string)
				p.mu.Unlock()
			case "admin listening":
				p.mu.Lock()
				p.admin, _ = rec["addr"].(string)
				p.mu.Unlock()
			case "http listening":
				p.mu.Lock()
				p.http, _ = rec["addr"].(string)
				p.mu.Unlock()
				once.Do(func() { close(bound) })
			}
		}
		p.cmd.Wait()
	}()
	select {
	case <-bound:
	case <-p.done:
		t.Fatalf("waymark exited before listening:\n%s", p.logs())
	case <-time.After(60 * time.Second):
		t.Fatalf("waymark did not listen within 60s:\n%s", p.logs())
	}
	return p
}

func (p *proc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// kill sends SIGKILL to the process group and waits for it to go.
func (p *proc) kill() {
	if p.cmd.Process == nil {
		return
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM and waits for a clean exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("waymark did not stop on SIGTERM:\n%s", p.logs())
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("waymark exited with %d after SIGTERM:\n%s", code, p.logs())
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// createRetrying creates a link, retrying while the cluster answers 503
// (an election under way: a loaded machine can miss heartbeats right after
// a restart) under one Idempotency-Key, so a retry never makes a second link.
func createRetrying(t *testing.T, url, key, body, idemKey string) response {
	t.Helper()
	var r response
	waitFor(t, "a create to be accepted", 30*time.Second, func() bool {
		r = do(t, "POST", url, key, body, "Idempotency-Key", idemKey)
		return r.status != http.StatusServiceUnavailable
	})
	return r
}

// noRedirect is an HTTP client that reports redirects instead of following.
var noRedirect = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v: %s", err, r.body)
	}
	return m
}

func do(t *testing.T, method, url, key, body string, hdr ...string) response {
	t.Helper()
	req := newRequest(t, method, url, key, body)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return roundTrip(t, noRedirect, req)
}

// newRequest is a request with the owner key (if any) as a bearer token
// and a JSON body (if any).
func newRequest(t *testing.T, method, url, key, body string) *http.Request {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// roundTrip sends req with client and reads the whole answer.
func roundTrip(t *testing.T, client *http.Client, req *http.Request) response {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// runCLI runs a waymark CLI command and returns stdout, stderr, exit code.
func runCLI(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("cannot run waymark %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

func readKey(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("cannot read %s: %v", path, err)
	}
	return strings.TrimSpace(string(b))
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), ds...)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.999999) - 1 // nearest rank
	return s[max(0, min(i, len(s)-1))]
}
