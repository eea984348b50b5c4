package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
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
