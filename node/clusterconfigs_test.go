package node

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v2"
)

const configsDir = "../cluster-configs"

// nodeFlagNames lists every flag `waymark node` accepts.
func nodeFlagNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	// -h makes ParseFlags print every flag, which we read back.
	var buf bytes.Buffer
	_, _, err := ParseFlagsOutput([]string{"-h"}, &buf)
	if err == nil {
		t.Fatal("-h did not stop flag parsing")
	}
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "-") {
			name, _, _ := strings.Cut(line[1:], " ")
			names[name] = true
		}
	}
	if len(names) < 10 {
		t.Fatalf("found only %d flags in the usage text", len(names))
	}
	return names
}

// Every ready-made loopback configuration validates as a real node config.
func TestThreeRegionConfigsValidate(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(configsDir, "three-region", "*.json"))
	if len(files) != 6 {
		t.Fatalf("got %d three-region configs; want 3 voters + 3 edges", len(files))
	}
	t.Setenv("WAYMARK_CLUSTER_KEY", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
	ports := map[string]string{}
	voters := 0
	for _, f := range files {
		cfg, _, err := ParseFlags([]string{"--config", f})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if cfg.HasRole(RoleVoter) {
			voters++
		}
		for _, addr := range []string{cfg.HTTPAddr, cfg.AdminAddr, cfg.RaftAddr, cfg.GossipAddr} {
			if other, dup := ports[addr]; dup {
				t.Fatalf("%s and %s both use %s", f, other, addr)
			}
			ports[addr] = f
		}
	}
	if voters != 3 {
		t.Fatalf("got %d voters; want 3", voters)
	}
}

// The production examples parse, and every flag they pass exists.
func TestProductionExamplesParse(t *testing.T) {
	names := nodeFlagNames(t)
	files, _ := filepath.Glob(filepath.Join(configsDir, "production", "kubernetes", "*.yaml"))
	if len(files) < 3 {
		t.Fatalf("got %d kubernetes manifests; want voters, edges and aggregator", len(files))
	}
	kinds := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var doc struct {
				Kind string `yaml:"kind"`
				Spec struct {
					Template struct {
						Spec struct {
							Containers []struct {
								Args []string `yaml:"args"`
							} `yaml:"containers"`
						} `yaml:"spec"`
					} `yaml:"template"`
				} `yaml:"spec"`
			}
			if err := dec.Decode(&doc); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			kinds[doc.Kind] = true
			for _, c := range doc.Spec.Template.Spec.Containers {
				for _, arg := range c.Args[1:] {
					name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
					if !names[name] {
						t.Errorf("%s: unknown flag %q", f, arg)
					}
				}
			}
		}
	}
	for _, k := range []string{"StatefulSet", "Deployment", "Service"} {
		if !kinds[k] {
			t.Errorf("no %s among the kubernetes manifests", k)
		}
	}
	env, err := os.ReadFile(filepath.Join(configsDir, "production", "systemd", "waymark.env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(env), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, _, ok := strings.Cut(line, "=")
		name := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(key, "WAYMARK_"), "_", "-"))
		if !ok || !strings.HasPrefix(key, "WAYMARK_") || !names[name] {
			t.Errorf("waymark.env: %q is not a WAYMARK_<flag> setting", line)
		}
	}
	unit, err := os.ReadFile(filepath.Join(configsDir, "production", "systemd", "waymark.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"[Service]", "ExecStart=/usr/local/bin/waymark node", "EnvironmentFile=", "KillSignal=SIGTERM", "[Install]"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("waymark.service lacks %q", want)
		}
	}
}
