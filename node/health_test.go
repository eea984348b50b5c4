package node

import (
	"strings"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
)

// Shipping trouble warns in the detail but is never a readiness check.
func TestShipChecksWarnOnly(t *testing.T) {
	cfg := Config{MaxShipLag: time.Minute, IngestMaxBytes: 1000}
	bad := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	checks := shipChecks(ingest.ShipStatus{
		Configured: true, OldestPendingAge: 2 * time.Hour, PendingBytes: 950,
		BadSegments: 2, OldestBad: "0000000000000003.bad", OldestBadAt: bad, LastError: "connection refused",
	}, cfg)
	want := map[string]float64{"ship_lag": 7200, "pending_bytes": 950, "bad_segments": 2}
	for _, c := range checks {
		if c.Readiness {
			t.Errorf("%s is a readiness check; shipping must never take a node out of rotation", c.Name)
		}
		if c.State != checkWarn || c.Value != want[c.Name] {
			t.Errorf("%s: state %s value %v; want warn, %v", c.Name, c.State, c.Value, want[c.Name])
		}
		delete(want, c.Name)
	}
	if len(want) != 0 {
		t.Errorf("missing checks: %v", want)
	}
	for _, c := range shipChecks(ingest.ShipStatus{Configured: true, OldestPendingAge: time.Second, PendingBytes: 10}, cfg) {
		if c.State != checkPass {
			t.Errorf("%s: state %s with nothing wrong; want pass", c.Name, c.State)
		}
	}
}

func TestStatusShippingRows(t *testing.T) {
	at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	rows := shippingRows(Shipping{AggregatorURL: "http://agg:8080", OldestPendingSeconds: 7200, MaxShipLagSeconds: 3600,
		PendingBytes: 4096, BadSegments: 2, OldestBad: "0000000000000003.bad", OldestBadAt: &at, RejectedMalformed: 1})
	got := map[string]string{}
	for _, r := range rows {
		got[r[0]] = r[1]
	}
	if got["ship lag"] != "2h0m0s (over --max-ship-lag 1h0m0s)" {
		t.Errorf("ship lag row: %q", got["ship lag"])
	}
	if got["bad segments"] != "2 (oldest 0000000000000003.bad, 2026-11-30T08:00:00Z)" {
		t.Errorf("bad segments row: %q", got["bad segments"])
	}
	if !strings.Contains(got["rejected segments"], "malformed 1") || got["pending bytes"] != "4096" {
		t.Errorf("rows: %v", got)
	}
}
