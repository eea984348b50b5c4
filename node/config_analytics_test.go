package node

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAnalyticsStoreFlags(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--dev", "--data-dir", dir, "--http-addr", "127.0.0.1:0"}
	cfg, _, err := ParseFlags(base)
	if err != nil || cfg.AnalyticsStore != "pebble" || cfg.ClickHouseDatabase != "waymark" {
		t.Fatalf("defaults: store %q database %q, %v; want pebble, waymark", cfg.AnalyticsStore, cfg.ClickHouseDatabase, err)
	}
	cfg, _, err = ParseFlags(append(base, "--analytics-store", "clickhouse", "--clickhouse-url", "http://127.0.0.1:8123",
		"--clickhouse-database", "wm_2", "--clickhouse-user", "waymark", "--clickhouse-password-file", pw,
		"--aggregator-url", "http://10.0.0.1:8080, http://10.0.0.2:8080", "--clickhouse-lateness", "90s"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AnalyticsStore != "clickhouse" || cfg.ClickHouseURL != "http://127.0.0.1:8123" || cfg.ClickHouseDatabase != "wm_2" ||
		cfg.ClickHouseUser != "waymark" || cfg.ClickHousePasswordFile != pw || cfg.ClickHouseLateness != 90*time.Second {
		t.Fatalf("clickhouse flags read as %+v", cfg)
	}
	if got := cfg.aggregatorURLs(); len(got) != 2 || got[1] != "http://10.0.0.2:8080" {
		t.Fatalf("aggregator list %q", got)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--analytics-store", "mysql"}, `--analytics-store "mysql" (want pebble or clickhouse)`},
		{[]string{"--analytics-store", "clickhouse"}, "needs --clickhouse-url"},
		{[]string{"--analytics-store", "clickhouse", "--clickhouse-url", "127.0.0.1:8123"}, "is not http(s)://host:port"},
		{[]string{"--analytics-store", "clickhouse", "--clickhouse-url", "http://h:8123", "--clickhouse-database", "my-db"}, "is not a plain name"},
		{[]string{"--analytics-store", "clickhouse", "--clickhouse-url", "http://h:8123", "--clickhouse-password-file", filepath.Join(dir, "none")}, "--clickhouse-password-file: cannot read"},
		{[]string{"--clickhouse-url", "http://h:8123"}, "need --analytics-store clickhouse"},
		{[]string{"--analytics-store", "clickhouse", "--clickhouse-url", "http://h:8123", "--clickhouse-lateness", "0s"}, "--clickhouse-lateness 0s: want a positive duration"},
		{[]string{"--analytics-store", "clickhouse", "--clickhouse-url", "http://h:8123", "--clickhouse-mark-settle", "-1s"}, "--clickhouse-mark-settle -1s: want 0 or a positive duration"},
		{[]string{"--aggregator-url", "http://a:1,agg:2"}, `--aggregator-url "agg:2": want http(s)://HOST:PORT`},
	} {
		_, _, err := ParseFlags(append(append([]string{}, base...), c.args...))
		if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v; want ErrBadConfig with %q", c.args, err, c.want)
		}
	}
	t.Setenv("WAYMARK_CLUSTER_KEY", base64.StdEncoding.EncodeToString(make([]byte, ClusterKeySize)))
	_, _, err = ParseFlags([]string{"--role", "edge", "--data-dir", dir,
		"--analytics-store", "clickhouse", "--clickhouse-url", "http://h:8123"})
	if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "no aggregator role") {
		t.Errorf("clickhouse on an edge: %v; want the aggregator role asked for", err)
	}
}
