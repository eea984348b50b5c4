package chserver

import (
	"context"
	"os"
	"testing"
	"time"
)

// Require returns the server binary for a test that needs one. Without
// the binary the test fails under WAYMARK_CI=1 (.ci/run installs the
// package, so a missing one is a broken CI) and is skipped otherwise,
// saying why. -short is no reason to skip: the server starts in seconds.
func Require(t testing.TB) string {
	t.Helper()
	bin, err := FindBinary(requiredBinary)
	if err == nil {
		return bin
	}
	if os.Getenv("WAYMARK_CI") != "" {
		t.Fatalf("WAYMARK_CI is set and %v", err)
	}
	t.Skipf("skipping: %v (WAYMARK_CI is unset; under WAYMARK_CI=1 this fails)", err)
	return ""
}

// requiredBinary is the binary Require looks for; its test names one
// that does not exist.
var requiredBinary = ""

// StartT starts a server for t in a folder of t.TempDir() and stops it
// when t ends (the folder goes with t.TempDir's cleanup).
func StartT(t testing.TB, users ...User) *Server {
	t.Helper()
	Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s, err := Start(ctx, Options{Dir: t.TempDir(), Users: users})
	if err != nil {
		t.Fatalf("cannot start clickhouse-server: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("cannot stop clickhouse-server %d: %v", s.Pid(), err)
		}
	})
	return s
}
