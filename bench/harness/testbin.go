package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The helpers in this file are for tests of the benchmarks.

// ServeTestRole turns a test binary into one of the children a test starts:
// when the environment variable env names a role in roles, TestMain runs
// that role's main and exits (status 1 on error) instead of the tests.
func ServeTestRole(env string, roles map[string]func() error) {
	main, ok := roles[os.Getenv(env)]
	if !ok {
		return
	}
	if err := main(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestBinaryChild describes a child that re-executes the test binary with
// env added, for a role ServeTestRole serves.
func TestBinaryChild(t testing.TB, name string, env ...string) ChildConfig {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("cannot find the test binary: %v", err)
	}
	return ChildConfig{Name: name, Path: exe, Env: env}
}

// BuildWaymark builds the real waymark binary into a temp dir of t and
// returns its path. It skips t under -short or without a go command.
func BuildWaymark(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping: builds and starts the real waymark binary (-short)")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("skipping: no go command to build waymark with")
	}
	bin := filepath.Join(t.TempDir(), "waymark")
	out, err := exec.Command(goBin, "build", "-o", bin, "github.com/waymark/waymark/cmd/waymark").CombinedOutput()
	if err != nil {
		t.Fatalf("cannot build waymark: %v\n%s", err, out)
	}
	return bin
}

// RunCommand runs a benchmark command's parse and run the way its main
// does, for a test: args plus -out (and -pin=false on a one-CPU machine),
// within timeout. It returns what the command printed and decodes the JSON
// report it wrote into rep.
func RunCommand[C any](t testing.TB, args []string, timeout time.Duration,
	parse func([]string, io.Writer) (C, error), run func(context.Context, C, io.Writer) error, rep any) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.json")
	args = append(args, "-out", out)
	if runtime.NumCPU() < 2 {
		args = append(args, "-pin=false")
	}
	cfg, err := parse(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var stdout strings.Builder
	if err := run(ctx, cfg, &stdout); err != nil {
		t.Fatalf("run: %v\n%s", err, stdout.String())
	}
	t.Logf("output:\n%s", stdout.String())
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, rep); err != nil {
		t.Fatal(err)
	}
	return stdout.String()
}
