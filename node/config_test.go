package node

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseFlagsDevDefaults(t *testing.T) {
	cfg, check, err := ParseFlags([]string{"--dev", "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if check {
		t.Fatal("check-config set without the flag")
	}
	for _, r := range []Role{RoleVoter, RoleEdge, RoleAggregator} {
		if !cfg.HasRole(r) {
			t.Fatalf("--dev roles: got %v; want every role", cfg.Roles)
		}
	}
	if len(cfg.TrustedProxies) == 0 {
		t.Fatal("--dev should trust loopback proxies")
	}
}

func TestParseFlagsEnvironment(t *testing.T) {
	t.Setenv("WAYMARK_REGION", "eu")
	t.Setenv("WAYMARK_HTTP_ADDR", "127.0.0.1:9999")
	cfg, _, err := ParseFlags([]string{"--dev", "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region != "eu" {
		t.Fatalf("region from WAYMARK_REGION: got %q; want eu", cfg.Region)
	}
	if cfg.HTTPAddr != "127.0.0.1:0" {
		t.Fatalf("a flag must win over the environment: got %q", cfg.HTTPAddr)
	}
}

// --raft-advertise is what other nodes dial; the bound address stays
// --raft-addr (the fault tier puts a proxy between the two).
func TestParseFlagsRaftAdvertise(t *testing.T) {
	cfg, _, err := ParseFlags([]string{"--dev", "--data-dir", t.TempDir(), "--raft-addr", "127.0.0.1:0", "--raft-advertise", "127.0.0.1:7400"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RaftAddr != "127.0.0.1:0" || cfg.RaftAdvertise != "127.0.0.1:7400" {
		t.Fatalf("raft addresses: bind %q advertise %q; want 127.0.0.1:0 and 127.0.0.1:7400", cfg.RaftAddr, cfg.RaftAdvertise)
	}
}

func TestParseFlagsErrors(t *testing.T) {
	cases := [][]string{
		{"--dev", "--role", "king"},
		{"--dev", "--http-addr", "nonsense"},
		{"--dev", "--log-format", "xml"},
		{"--dev", "--trusted-proxies", "10.0.0.0/99"},
		{"--dev", "stray"},
		{"--role", "voter"}, // no cluster key outside --dev
		{"--dev", "--bootstrap-expect", "-1"},
		{"--dev", "--raft-advertise", "127.0.0.1:0"},
		{"--dev", "--raft-advertise", "0.0.0.0:7000"},
		{"--dev", "--raft-advertise", ":7000"},
		{"--dev", "--raft-advertise", "raft.example:7000"},
		{"--dev", "--key-use-flush", "500ms"},
	}
	for _, args := range cases {
		_, _, err := ParseFlags(append(args, "--data-dir", t.TempDir()))
		if !errors.Is(err, ErrBadConfig) {
			t.Errorf("ParseFlags(%v): got %v; want ErrBadConfig", args, err)
		}
	}
}

// Node names and regions travel in every event; one over the limit made
// every segment undecodable at the aggregator.
func TestNameAndRegionLength(t *testing.T) {
	long := strings.Repeat("n", MaxNameLen+1)
	for _, args := range [][]string{{"--name", long}, {"--region", long}} {
		_, _, err := ParseFlags(append([]string{"--dev", "--data-dir", t.TempDir()}, args...))
		if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "at most 64") {
			t.Errorf("ParseFlags(%s of %d bytes): got %v; want ErrBadConfig saying at most 64", args[0], len(long), err)
		}
	}
	if _, _, err := ParseFlags([]string{"--dev", "--data-dir", t.TempDir(), "--name", long[:MaxNameLen], "--region", long[:MaxNameLen]}); err != nil {
		t.Errorf("64-byte name and region: %v; want accepted", err)
	}
}

func TestDefaultNodeName(t *testing.T) {
	if got := defaultNodeName("edge-1.eu-west-1.compute.internal"); got != "edge-1.eu-west-1.compute.internal" {
		t.Errorf("a host name that fits must be used as is: got %q", got)
	}
	a := "ip-10-0-0-1.a-rather-long-availability-zone-name.eu-west-1.compute.internal"
	b := "ip-10-0-0-1.a-rather-long-availability-zone-name.eu-west-1.compute.internal.example"
	na, nb := defaultNodeName(a), defaultNodeName(b)
	if len(na) > MaxNameLen || len(nb) > MaxNameLen {
		t.Fatalf("names %q (%d), %q (%d); want at most %d bytes", na, len(na), nb, len(nb), MaxNameLen)
	}
	if na == nb || !strings.HasPrefix(na, "ip-10-0-0-1.a-rather-long") {
		t.Errorf("long names %q and %q: want distinct names that start like the host name", na, nb)
	}
	if defaultNodeName(a) != na {
		t.Errorf("default name is not stable")
	}
	if n := defaultNodeName(strings.Repeat("é", 40)); len(n) > MaxNameLen || !utf8.ValidString(n) {
		t.Errorf("multi-byte host name: got %q (%d bytes); want valid UTF-8 within the limit", n, len(n))
	}
}

// Operator commands take flags before, between and after their
// arguments; "--" ends the flags.
func TestParseInterspersedFlags(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		format string
		pos    string
	}{
		{[]string{"eu", "-format", "json"}, "json", "[eu]"},
		{[]string{"-format", "json", "eu"}, "json", "[eu]"},
		{[]string{"eu", "--format=json", "ap"}, "json", "[eu ap]"},
		{[]string{"eu", "ap"}, "table", "[eu ap]"},
		{[]string{"eu", "--", "-format"}, "table", "[eu -format]"},
		{nil, "table", "[]"},
	} {
		fs, mk, err := parseCommandFlags("regions add", tc.args, "NAME...", 0, -1, nil)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		c, err := mk()
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if c.format != tc.format || fmt.Sprint(fs.Args()) != tc.pos {
			t.Errorf("%q: got format %q args %v; want %q %s", tc.args, c.format, fs.Args(), tc.format, tc.pos)
		}
	}
}
