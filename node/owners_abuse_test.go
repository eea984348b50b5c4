package node

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/waymark/waymark/store"
)

func TestAbuseFlags(t *testing.T) {
	cfg, _, err := ParseFlags([]string{"--dev", "--data-dir", t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CreateRateIP != 10 || cfg.CreateRateKey != 20 || cfg.CreateRateDomain != 50 || cfg.PurgeAfter != 720*time.Hour {
		t.Errorf("defaults: ip %v key %v domain %v purge %v; want 10, 20, 50, 720h", cfg.CreateRateIP, cfg.CreateRateKey, cfg.CreateRateDomain, cfg.PurgeAfter)
	}
	cfg, _, err = ParseFlags([]string{"--dev", "--data-dir", t.TempDir(), "--create-rate-ip", "0", "--purge-after", "0"})
	if err != nil || createRate(cfg.CreateRateIP) >= 0 || purgeAfter(cfg.PurgeAfter) >= 0 {
		t.Errorf("0 must turn the limit and the purge off: %v, %v, %v", createRate(cfg.CreateRateIP), purgeAfter(cfg.PurgeAfter), err)
	}
	for _, bad := range [][]string{
		{"--create-rate-ip", "-1"}, {"--create-rate-key", "-0.5"}, {"--create-rate-domain", "-2"}, {"--purge-after", "-1h"},
	} {
		if _, _, err := ParseFlags(append([]string{"--dev", "--data-dir", t.TempDir()}, bad...)); !errors.Is(err, ErrBadConfig) {
			t.Errorf("ParseFlags(%v): %v; want ErrBadConfig", bad, err)
		}
	}
}

func TestCheckReason(t *testing.T) {
	for reason, ok := range map[string]bool{
		"phishing campaign":  true,
		"line one\nline two": true,
		"":                   false,
		"tab\there":          false,
		"bell\a":             false,
		strings.Repeat("x", store.MaxSuspendReason):   true,
		strings.Repeat("x", store.MaxSuspendReason+1): false,
	} {
		if err := checkReason(reason); (err == nil) != ok {
			t.Errorf("checkReason(%.20q) = %v; want ok %v", reason, err, ok)
		}
	}
}
