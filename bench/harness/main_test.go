package harness

import (
	"os"
	"testing"
)

// baselineChildEnv makes the test binary act as a baseline child process, so
// tests can start real baseline processes without building anything.
const baselineChildEnv = "HARNESS_TEST_BASELINE_CHILD"

func TestMain(m *testing.M) {
	ServeTestRole(baselineChildEnv, map[string]func() error{"1": BaselineChildMain})
	os.Exit(m.Run())
}

func baselineChildConfig(t testing.TB) ChildConfig {
	t.Helper()
	return TestBinaryChild(t, "", baselineChildEnv+"=1")
}
