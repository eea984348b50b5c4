package harness

import (
	"fmt"
	"os"
	"testing"
)

// baselineChildEnv makes the test binary act as a baseline child process, so
// tests can start real baseline processes without building anything.
const baselineChildEnv = "HARNESS_TEST_BASELINE_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(baselineChildEnv) == "1" {
		if err := BaselineChildMain(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func baselineChildConfig(t testing.TB) ChildConfig {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("cannot find the test binary: %v", err)
	}
	return ChildConfig{Path: exe, Env: []string{baselineChildEnv + "=1"}}
}
