package chserver

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRenderConfigAddsUsers(t *testing.T) {
	_, users := RenderConfig("/tmp/x", 1, 2, User{Name: "waymark", Password: "a<b&c"})
	for _, want := range []string{"<default>\n            <password></password>", "<waymark>\n            <password>a&lt;b&amp;c</password>", "</waymark>"} {
		if !strings.Contains(string(users), want) {
			t.Errorf("users config lacks %q:\n%s", want, users)
		}
	}
}

// The skip/fail rule, in a child test process that looks for a binary
// that does not exist: skipped without WAYMARK_CI, failed with it.
func TestRequireSkipsOrFails(t *testing.T) {
	if os.Getenv("CHSERVER_REQUIRE_CHILD") != "" {
		requiredBinary = "clickhouse-server-that-is-not-installed"
		Require(t)
		t.Log("BUG: Require returned without the binary")
		return
	}
	for _, ci := range []string{"", "1"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRequireSkipsOrFails$", "-test.v")
		cmd.Env = append(os.Environ(), "CHSERVER_REQUIRE_CHILD=1", "WAYMARK_CI="+ci)
		out, err := cmd.CombinedOutput()
		switch {
		case ci == "" && (err != nil || !strings.Contains(string(out), "--- SKIP") || !strings.Contains(string(out), "WAYMARK_CI is unset")):
			t.Errorf("without WAYMARK_CI: %v\n%s; want a skip that says why", err, out)
		case ci != "" && (err == nil || !strings.Contains(string(out), "--- FAIL") || !strings.Contains(string(out), "install the clickhouse-server package")):
			t.Errorf("with WAYMARK_CI=1: %v\n%s; want a failure naming the package", err, out)
		}
	}
}

func processGone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

// Start, crash, restart on the same folder and ports (the data kept),
// stop: no process is left.
func TestStartKillRestartStop(t *testing.T) {
	Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if s.Version == "" {
		t.Errorf("version %q", s.Version)
	}
	if err := s.Exec(ctx, "CREATE TABLE t (x UInt8) ENGINE = MergeTree() ORDER BY x"); err != nil {
		t.Fatal(err)
	}
	if err := s.Insert(ctx, "INSERT INTO t FORMAT TabSeparated", []byte("7\n")); err != nil {
		t.Fatal(err)
	}
	addr, first := s.HTTPAddr, s.Pid()
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if !processGone(first) {
		t.Fatalf("clickhouse-server %d still exists after Kill", first)
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if s.HTTPAddr != addr || s.Pid() == first {
		t.Errorf("restarted at %s pid %d; want %s and a new pid", s.HTTPAddr, s.Pid(), addr)
	}
	if got, err := s.Query(ctx, "SELECT sum(x) FROM t"); err != nil || got != "7\n" {
		t.Errorf("after the restart: %q, %v; want 7", got, err)
	}
	second := s.Pid()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if !processGone(second) {
		t.Errorf("clickhouse-server %d still exists after Stop", second)
	}
}
