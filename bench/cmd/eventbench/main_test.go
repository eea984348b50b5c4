package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

// baselineRoleEnv turns the test binary into the event baseline child.
const baselineRoleEnv = "EVENTBENCH_TEST_BASELINE"

func TestMain(m *testing.M) {
	harness.ServeTestRole(baselineRoleEnv, map[string]func() error{"1": harness.EventBaselineChildMain})
	os.Exit(m.Run())
}

// TestEventbenchEndToEnd runs the whole command against the real node for
// about a second per phase: sites registered, both servers measured, no
// failed request, and the raw store holding exactly what was accepted.
// Many sites at low concurrency keep every site under the node's
// per-site limit (1000 events/s, burst 2000).
func TestEventbenchEndToEnd(t *testing.T) {
	bin := harness.BuildWaymark(t)
	out := filepath.Join(t.TempDir(), "out.json")
	args := []string{"-waymark", bin, "-sites", "32", "-conns", "4", "-warmup", "200ms", "-duration", "1s",
		"-rounds", "1", "-visitors", "500", "-out", out}
	cfg, err := parseFlags(args, io.Discard)
	if err != nil {
		t.Fatalf("parseFlags(%q): %v", args, err)
	}
	cfg.Baseline = harness.TestBinaryChild(t, "baseline", baselineRoleEnv+"=1")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var log strings.Builder
	if err := run(ctx, cfg, &log); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, log.String())
	}
	t.Logf("output:\n%s", log.String())

	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("cannot read the report: %v", err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("cannot decode the report: %v", err)
	}
	if len(rep.Rounds) != 1 {
		t.Fatalf("rounds = %d; want 1", len(rep.Rounds))
	}
	rd := rep.Rounds[0]
	if rd.Node.OK == 0 || rd.Baseline.OK == 0 {
		t.Errorf("accepted events: node %d, baseline %d; want both above 0", rd.Node.OK, rd.Baseline.OK)
	}
	if rep.Summary.Errors != 0 {
		t.Errorf("errors = %d; want 0 (node %+v)", rep.Summary.Errors, rd.Node)
	}
	st := rep.Stored
	if st == nil || !st.ExactlyOnce {
		t.Fatalf("stored check = %+v; want exactly once", st)
	}
	// The whole-run tally covers more than the window: probes and warm-up.
	if st.Accepted <= rd.Node.OK {
		t.Errorf("accepted = %d; want more than the %d of the window", st.Accepted, rd.Node.OK)
	}
	if st.CLICount == "" || st.CLICount == "0" {
		t.Errorf("CLI count = %q; want the first site's events", st.CLICount)
	}
}

func TestParseFlagsRejects(t *testing.T) {
	for _, args := range [][]string{
		{"-sites", "0"},
		{"-visitors", "200000"},
		{"-conns", "0"},
		{"-duration", "0s"},
		{"-rounds", "0"},
		{"-settle-timeout", "0s"},
		{"extra"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) = nil error; want one", args)
		}
	}
	cfg, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatalf("parseFlags(nil): %v", err)
	}
	if cfg.Conns != 64 || cfg.Duration != 10*time.Second || cfg.Rounds != 3 || cfg.Sites != 1 {
		t.Errorf("defaults = %d conns, %v, %d rounds, %d sites; want 64, 10s, 3, 1", cfg.Conns, cfg.Duration, cfg.Rounds, cfg.Sites)
	}
}
