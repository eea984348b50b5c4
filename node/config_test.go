package node

import (
	"errors"
	"testing"
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

func TestParseFlagsErrors(t *testing.T) {
	cases := [][]string{
		{"--dev", "--role", "king"},
		{"--dev", "--http-addr", "nonsense"},
		{"--dev", "--log-format", "xml"},
		{"--dev", "--trusted-proxies", "10.0.0.0/99"},
		{"--dev", "stray"},
		{"--role", "voter"}, // no cluster key outside --dev
		{"--dev", "--bootstrap-expect", "-1"},
	}
	for _, args := range cases {
		_, _, err := ParseFlags(append(args, "--data-dir", t.TempDir()))
		if !errors.Is(err, ErrBadConfig) {
			t.Errorf("ParseFlags(%v): got %v; want ErrBadConfig", args, err)
		}
	}
}
