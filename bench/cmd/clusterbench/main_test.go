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

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-links", "1000", "-creates-duration", "3s", "-takedowns", "5", "-lag-samples", "7", "-skip-catchup", "-node-args", "--log-level warn"}, io.Discard)
	if err != nil {
		t.Fatalf("parseFlags: %v", err)
	}
	if cfg.Links != 1000 || cfg.CreatesDuration != 3*time.Second || cfg.Takedowns != 5 || cfg.LagSamples != 7 || !cfg.SkipCatchup {
		t.Errorf("got %+v; want the flags' values", cfg)
	}
	if got, want := strings.Join(cfg.NodeArgs, " "), "--log-level warn"; got != want {
		t.Errorf("NodeArgs = %q; want %q", got, want)
	}
	if cfg.Conns != 64 || cfg.Owners != 16 {
		t.Errorf("conns %d, owners %d; want defaults 64 and 16", cfg.Conns, cfg.Owners)
	}
}

func TestParseFlagsRejects(t *testing.T) {
	for _, args := range [][]string{
		{"-conns", "0"},
		{"-creates-duration", "0s"},
		{"-takedowns", "-1"},
		{"-links", "0"},
		{"extra"},
	} {
		var stderr strings.Builder
		if _, err := parseFlags(args, &stderr); err == nil {
			t.Errorf("parseFlags(%q) succeeded; want an error", args)
		}
	}
	// Without the catch-up, -links does not matter.
	if _, err := parseFlags([]string{"-links", "0", "-skip-catchup"}, io.Discard); err != nil {
		t.Errorf("parseFlags(-links 0 -skip-catchup): %v; want nil", err)
	}
}

func TestNewestSnapshot(t *testing.T) {
	dir := t.TempDir()
	if _, ok := newestSnapshot(filepath.Join(dir, "missing")); ok {
		t.Error("newestSnapshot of a missing dir found one")
	}
	write := func(name string, index uint64) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(map[string]any{"ID": name, "Index": index, "Term": 2})
		if err := os.WriteFile(filepath.Join(dir, name, "meta.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("2-100-1", 100)
	write("2-300-2", 300)
	write("2-900-3.tmp", 900) // still being written
	// A folder without meta.json is not a snapshot yet.
	if err := os.MkdirAll(filepath.Join(dir, "2-800-4"), 0o755); err != nil {
		t.Fatal(err)
	}
	idx, ok := newestSnapshot(dir)
	if !ok || idx != 300 {
		t.Errorf("newestSnapshot = %d, %v; want 300, true", idx, ok)
	}
}

func TestReportPrint(t *testing.T) {
	r := newReport(config{})
	r.Creates = []Throughput{{Via: "leader", Node: "v1", Conns: 64, PerSecond: 6000, Created: 60000}, {Via: "edge (forwarded)", Node: "e1", Conns: 64, PerSecond: 3000}}
	r.Lag = []LagResult{{Label: "idle", Samples: 10}}
	r.Takedown = &TakedownResult{Takedowns: 5, Nodes: 5, AllNodes: Distribution{P99: 2 * time.Second}}
	r.Catchup = &CatchupResult{Loaded: 10, SnapshotIndex: 42, Resolved: time.Second, FromSnapshot: true}
	var out strings.Builder
	r.print(&out)
	for _, want := range []string{">= 5,000/s: met", ">= 5,000/s: MISSED", "p99 < 1s: MISSED", "index 42", "snapshot restored"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// TestRunEndToEnd runs every phase, shortened, against a real five-node
// cluster built from this tree.
func TestRunEndToEnd(t *testing.T) {
	bin := harness.BuildWaymark(t)
	outFile := filepath.Join(t.TempDir(), "out.json")
	cfg, err := parseFlags([]string{"-waymark", bin, "-owners", "2", "-conns", "8",
		"-creates-warmup", "0s", "-creates-duration", "500ms", "-lag-samples", "3", "-lag-load-conns", "2",
		"-takedowns", "2", "-links", "20000", "-load-max", "2s", "-snapshot-wait", "0s", "-out", outFile}, io.Discard)
	if err != nil {
		t.Fatalf("parseFlags: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out strings.Builder
	if err := run(ctx, cfg, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	b, err := os.ReadFile(outFile)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("cannot decode %s: %v", outFile, err)
	}
	if len(rep.Creates) != 2 || rep.Creates[0].Created == 0 || rep.Creates[1].Created == 0 {
		t.Errorf("creates = %+v; want two runs with creates", rep.Creates)
	}
	if len(rep.Lag) != 2 || rep.Lag[0].AllEdges.N != 3 {
		t.Errorf("lag = %+v; want two passes of 3 samples", rep.Lag)
	}
	if rep.Takedown == nil || rep.Takedown.AllNodes.N != 2 || rep.Takedown.Nodes != 5 {
		t.Errorf("takedown = %+v; want 2 takedowns over 5 nodes", rep.Takedown)
	}
	if c := rep.Catchup; c == nil || c.Resolved <= 0 || c.TargetApplied == 0 {
		t.Errorf("catch-up = %+v; want the new edge caught up", c)
	}
	if !strings.Contains(out.String(), "takedown: 410 on all 5 nodes") {
		t.Errorf("no summary table in the output:\n%s", out.String())
	}
}
