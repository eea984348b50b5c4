package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

// roleEnv turns the test binary into the floor server.
const roleEnv = "REDIRECTMATRIX_TEST_ROLE"

func TestMain(m *testing.M) {
	harness.ServeTestRole(roleEnv, map[string]func() error{"floor": harness.BaselineChildMain})
	os.Exit(m.Run())
}

func TestParseFlagsRejects(t *testing.T) {
	for _, args := range [][]string{
		{"-targets", "floor,bogus"},
		{"-targets", "floor,floor"},
		{"-links", "0"},
		{"-visitors", "-1"},
		{"-visitors", "200000"},
		{"-loadgen", "ab"},
		{"-server-cpu", "1", "-load-cpu", "1"},
		{"-rounds", "0"},
		{"stray"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) succeeded; want an error", args)
		}
	}
	cfg, err := parseFlags([]string{"-pin=false"}, io.Discard)
	if err != nil || cfg.ServerCPU != "" || cfg.LoadCPU != "" || cfg.AggregatorCPU != "" {
		t.Errorf("-pin=false: got %+v, %v; want no CPU lists", cfg, err)
	}
}

// TestSummarizeRatios checks the ratios against figures worked out by
// hand: each is the median of the per-round ratios to the floor of the
// same round.
func TestSummarizeRatios(t *testing.T) {
	fig := func(p99 float64) harness.RunFigures { return harness.RunFigures{P99Micros: p99, OK: 1} }
	rep := &Report{
		Servers: []ServerInfo{{Name: targetFloor}, {Name: targetDev}},
		Rounds: []Round{
			{Number: 1, Runs: []Measurement{
				{Target: targetFloor, RPS: 100, CPUMicrosPerRequest: 5, RunFigures: fig(1000), StartedIdle: true},
				{Target: targetDev, RPS: 90, CPUMicrosPerRequest: 6, RunFigures: fig(3000), StartedIdle: true},
			}},
			{Number: 2, Runs: []Measurement{
				{Target: targetDev, RPS: 150, CPUMicrosPerRequest: 5, RunFigures: fig(2000)},
				{Target: targetFloor, RPS: 200, CPUMicrosPerRequest: 4, RunFigures: fig(1000), StartedIdle: true},
			}},
			{Number: 3, Runs: []Measurement{
				{Target: targetFloor, RPS: 100, CPUMicrosPerRequest: 5, RunFigures: fig(2000), StartedIdle: true},
				{Target: targetDev, RPS: 50, CPUMicrosPerRequest: 10, RunFigures: fig(2000), StartedIdle: true},
			}},
		},
	}
	rep.summarize()
	dev := rep.Summary[1]
	// req/s: 0.9, 0.75, 0.5 -> 0.75. CPU: 1.2, 1.25, 2 -> 1.25.
	// p99: 3, 2, 1 -> 2. Medians of the raw figures: 90 req/s, 6 µs.
	checks := []struct {
		name      string
		got, want float64
	}{
		{"rps ratio", dev.RPSRatio, 0.75},
		{"cpu ratio", dev.CPURatio, 1.25},
		{"p99 ratio", dev.P99Ratio, 2},
		{"rps", dev.RPS, 90},
		{"cpu/request", dev.CPUMicrosPerRequest, 6},
		{"p99", dev.P99Micros, 2000},
		{"not idle", float64(dev.NotIdleRuns), 1},
		{"floor rps ratio", rep.Summary[0].RPSRatio, 1},
	}
	for _, c := range checks {
		if diff := c.got - c.want; diff > 1e-9 || diff < -1e-9 {
			t.Errorf("%s = %v; want %v", c.name, c.got, c.want)
		}
	}
}

// TestRunAllTargets runs the whole matrix once against the real binary,
// nginx and wrk, with tiny sizes, and checks every process is gone after.
func TestRunAllTargets(t *testing.T) {
	bin := harness.BuildWaymark(t)
	for _, tool := range []func(string) (string, error){harness.FindNginx, harness.FindWrk} {
		if _, err := tool(""); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "out.json")
	args := []string{"-waymark", bin, "-links", "50", "-conns", "4", "-visitors", "100",
		"-warmup", "0s", "-duration", "1s", "-rounds", "1", "-idle-timeout", "20s", "-out", out}
	pinned := runtime.NumCPU() >= 2
	if !pinned {
		args = append(args, "-pin=false")
	}
	cfg, err := parseFlags(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg.IdleSample = 200 * time.Millisecond
	cfg.Baseline = harness.TestBinaryChild(t, targetFloor, roleEnv+"=floor")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
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
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Summary) != len(knownTargets) {
		t.Fatalf("got %d summaries; want %d", len(rep.Summary), len(knownTargets))
	}
	for i, s := range rep.Summary {
		if s.Target != knownTargets[i] {
			t.Errorf("summary %d is %s; want %s", i, s.Target, knownTargets[i])
		}
		if s.RPS <= 0 || s.CPUMicrosPerRequest <= 0 || s.P99Micros < s.P50Micros || s.Errors != 0 {
			t.Errorf("%s: %.0f req/s, %.2f µs/req, p50 %.0f, p99 %.0f, %d errors; want positive figures, no error",
				s.Target, s.RPS, s.CPUMicrosPerRequest, s.P50Micros, s.P99Micros, s.Errors)
		}
		if s.RPSRatio <= 0 || s.CPURatio <= 0 || s.P99Ratio <= 0 {
			t.Errorf("%s: ratios %v %v %v; want all positive", s.Target, s.RPSRatio, s.CPURatio, s.P99Ratio)
		}
		if s.LoadGenCPUShare <= 0 || s.OthersOnServerCPU < 0 || s.OthersOnLoadCPU < 0 {
			t.Errorf("%s: load generator %v busy, others %v / %v; want a busy generator, no negative share", s.Target, s.LoadGenCPUShare, s.OthersOnServerCPU, s.OthersOnLoadCPU)
		}
		if s.ResponseBytes < 100 {
			t.Errorf("%s: %d bytes per answer; want a whole 302", s.Target, s.ResponseBytes)
		}
	}
	if floor := rep.Summary[0]; floor.RPSRatio != 1 || floor.CPURatio != 1 || floor.P99Ratio != 1 {
		t.Errorf("floor: ratios to itself %v %v %v; want 1", floor.RPSRatio, floor.CPURatio, floor.P99Ratio)
	}
	for _, info := range rep.Servers {
		if info.Name == targetEdge && len(info.Helpers) != 1 {
			t.Errorf("edge: helper processes %v; want its aggregator", info.Helpers)
		}
	}
	for _, info := range rep.Servers {
		if pinned && info.Affinity != "0" {
			t.Errorf("%s ran on CPU %q; want 0", info.Name, info.Affinity)
		}
		for _, pid := range append([]int{info.Pid}, info.Helpers...) {
			if !harness.ProcessGone(pid) {
				t.Errorf("%s: process %d still exists after the run", info.Name, pid)
			}
		}
	}
	if !strings.Contains(stdout.String(), "| server | req/s |") || !strings.Contains(stdout.String(), "shipping works") {
		t.Errorf("output lacks the table or the shipping check:\n%s", stdout.String())
	}
}
