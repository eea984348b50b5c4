package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

// roleEnv turns the test binary into one of the children the benchmark
// starts: "baseline" (the real baseline) or "node" (a fake waymark node).
const roleEnv = "REDIRECTBENCH_TEST_ROLE"

func TestMain(m *testing.M) {
	harness.ServeTestRole(roleEnv, map[string]func() error{
		"baseline": harness.BaselineChildMain,
		"node":     func() error { return fakeNodeMain(os.Args[1:]) },
	})
	os.Exit(m.Run())
}

// fakeNodeMain behaves like `waymark node --dev` as far as the benchmark can
// see: it logs its address as JSON, writes DATA_DIR/dev-api-key, answers
// /readyz, creates links and redirects them.
func fakeNodeMain(args []string) error {
	if len(args) == 5 && args[0] == "owners" && args[1] == "create" && args[2] == "--data-dir" {
		fmt.Println("fake-key-" + args[4])
		return nil
	}
	if len(args) < 2 || args[0] != "node" || args[1] != "--dev" {
		return fmt.Errorf("fake node: got args %q; want node --dev ...", args)
	}
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "", "")
	httpAddr := fs.String("http-addr", "", "")
	fs.String("admin-addr", "", "")
	if err := fs.Parse(args[2:]); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*dataDir, "dev-api-key"), []byte("fake-key\n"), 0o600); err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	log.Info("admin listening", "addr", "127.0.0.1:1")
	log.Info("http listening", "addr", ln.Addr().String())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Handler: newFakeNode("fake-key")}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}

type fakeNode struct {
	key    string
	mu     sync.Mutex
	byCode map[string]string
}

func newFakeNode(key string) *fakeNode {
	return &fakeNode{key: key, byCode: map[string]string{}}
}

func (f *fakeNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/readyz":
		w.WriteHeader(http.StatusOK)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/links":
		if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer "+f.key) {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		var body struct{ URL string }
		if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&body); err != nil {
			http.Error(w, "invalid-url", http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		code := fmt.Sprintf("f%06d", len(f.byCode))
		f.byCode[code] = body.URL
		f.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"code":%q}`, code)
	default:
		f.mu.Lock()
		dest, ok := f.byCode[strings.TrimPrefix(r.URL.Path, "/")]
		f.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Location", dest)
		w.Header().Set("Cache-Control", "private, max-age=90")
		w.WriteHeader(http.StatusFound)
	}
}

// testConfig is a short benchmark: two rounds of 0.1 s warmup and 0.3 s.
func testConfig(t *testing.T, extraArgs ...string) config {
	t.Helper()
	args := append([]string{"-links", "200", "-load-workers", "8", "-conns", "4",
		"-warmup", "100ms", "-duration", "300ms", "-rounds", "2",
		"-out", filepath.Join(t.TempDir(), "out.json")}, extraArgs...)
	cfg, err := parseFlags(args, io.Discard)
	if err != nil {
		t.Fatalf("parseFlags(%q): %v", args, err)
	}
	cfg.Baseline = harness.TestBinaryChild(t, "baseline", roleEnv+"=baseline")
	return cfg
}

func readReport(t *testing.T, path string) Report {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("cannot read report: %v", err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("cannot decode report: %v", err)
	}
	return rep
}

func checkReport(t *testing.T, rep Report, out string) {
	t.Helper()
	if got, want := len(rep.Rounds), 2; got != want {
		t.Errorf("got %d rounds; want %d", got, want)
	}
	s := rep.Summary
	if s.Baseline.RPS <= 0 || s.Node.RPS <= 0 || s.Ratio <= 0 {
		t.Errorf("got baseline %.0f req/s, node %.0f req/s, ratio %.3f; want all > 0", s.Baseline.RPS, s.Node.RPS, s.Ratio)
	}
	if s.Errors != 0 {
		t.Errorf("got %d errors; want 0 (rounds %+v)", s.Errors, rep.Rounds)
	}
	if s.Node.P50Micros <= 0 || s.Node.P99Micros < s.Node.P50Micros {
		t.Errorf("node p50 %.0fµs, p99 %.0fµs; want 0 < p50 <= p99", s.Node.P50Micros, s.Node.P99Micros)
	}
	for _, want := range []string{"median of 2 rounds", "baseline", "/baseline throughput"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestRunStartsNodeChild(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("cannot find the test binary: %v", err)
	}
	cfg := testConfig(t, "-waymark", exe, "-keys", "3")
	cfg.NodeEnv = []string{roleEnv + "=node"}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out strings.Builder
	if err := run(ctx, cfg, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	t.Logf("output:\n%s", out.String())
	checkReport(t, readReport(t, cfg.Out), out.String())
	if !strings.Contains(out.String(), "primed node: each of 200 paths once") {
		t.Errorf("output lacks the priming line:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "8 workers and 3 API keys") {
		t.Errorf("output lacks the key count:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "loaded 200/200 links (100%)") {
		t.Errorf("output lacks the final progress line:\n%s", out.String())
	}
}

func TestRunAgainstRunningNode(t *testing.T) {
	srv := httptest.NewServer(newFakeNode("k2"))
	defer srv.Close()
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte("k2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, "-url", srv.URL, "-api-key-file", keyFile)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out strings.Builder
	if err := run(ctx, cfg, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	checkReport(t, readReport(t, cfg.Out), out.String())
}

func TestRunAA(t *testing.T) {
	cfg := testConfig(t, "-aa")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out strings.Builder
	if err := run(ctx, cfg, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	rep := readReport(t, cfg.Out)
	checkReport(t, rep, out.String())
	if got, want := rep.Summary.Node.Target, "baseline-b"; got != want {
		t.Errorf("second target = %q; want %q", got, want)
	}
}

func TestParseFlagsRejects(t *testing.T) {
	tests := [][]string{
		{"-links", "0"},
		{"-rounds", "0"},
		{"-duration", "0s"},
		{"-conns", "-1"},
		{"-url", "http://127.0.0.1:1"},
		{"-api-key-file", "k"},
		{"-url", "http://127.0.0.1:1", "-api-key-file", "k", "-waymark", "w"},
		{"stray"},
		{"-aa", "-waymark", "w"},
	}
	for _, args := range tests {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) succeeded; want an error", args)
		}
	}
}

func TestExistingTargetRefusesNonLoopback(t *testing.T) {
	cfg := config{NodeURL: "http://192.0.2.1:8080", APIKeyFile: "/dev/null", StartTimeout: time.Second}
	if _, err := existingTarget(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("existingTarget(%s): got %v; want a loopback error", cfg.NodeURL, err)
	}
}
