package rollup

import (
	"encoding/binary"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/internal/world"
)

const testToken = "test-token"

// testClock is an injectable clock that tests move by hand.
// The background retention loop reads it, so it is guarded.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock.
func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// base is the clock's start in every test: noon, so an hour either way
// stays on the same day.
var base = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func testConfig(t *testing.T, dir string, clock *testClock) Config {
	t.Helper()
	return Config{
		Dir:     dir,
		Token:   testToken,
		Logger:  slog.New(slog.DiscardHandler),
		Metrics: metrics.NewSet(),
		Now:     clock.Now,
	}
}

func openTest(t *testing.T, cfg Config) *Aggregator {
	t.Helper()
	a, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// eventID makes a deterministic event id from a label and a number.
func eventID(label string, n int) [16]byte {
	var id [16]byte
	copy(id[:8], label)
	binary.BigEndian.PutUint64(id[8:], uint64(n))
	return id
}

// click is a click event on code at t.
func click(label string, n int, code string, t time.Time, bot bool) ingest.Event {
	ev := ingest.Event{
		Kind: ingest.KindClick, ID: eventID(label, n), Time: t.UnixMilli(),
		Code: code, Node: "edge-1", Region: "eu", Country: "DE", Device: "desktop",
		Browser: "Firefox", OS: "Linux", ReferrerHost: "example.org", VisitorHash: uint64(n),
	}
	if bot {
		ev.Flags |= ingest.FlagBot
	}
	return ev
}

// pageview is a pageview event of site at t.
func pageview(label string, n int, site string, t time.Time, bot bool) ingest.Event {
	ev := ingest.Event{
		Kind: ingest.KindPageview, ID: eventID(label, n), Time: t.UnixMilli(),
		SiteID: site, Name: "pageview", Path: "/pricing", Node: "edge-1", Region: "eu",
		Props: []ingest.Prop{{Key: "plan", Value: "pro"}},
	}
	if bot {
		ev.Flags |= ingest.FlagBot
	}
	return ev
}

// segmentBytes frames events as a sealed segment file
// (world.SegmentBytes).
func segmentBytes(node string, seq uint64, events ...ingest.Event) []byte {
	return world.SegmentBytes(node, seq, events...)
}

// corrupt flips one byte in the last record's payload of a segment.
func corrupt(seg []byte) []byte {
	out := append([]byte(nil), seg...)
	out[len(out)-13-3] ^= 0xff
	return out
}

func mustCount(t *testing.T, a *Aggregator, f Filter) uint64 {
	t.Helper()
	n, err := a.Count(f)
	if err != nil {
		t.Fatalf("Count(%+v): %v", f, err)
	}
	return n
}

func wantCount(t *testing.T, a *Aggregator, f Filter, want uint64) {
	t.Helper()
	if got := mustCount(t, a, f); got != want {
		t.Errorf("Count(%+v): got %d; want %d", f, got, want)
	}
}

func TestConfigValidation(t *testing.T) {
	clock := &testClock{now: base}
	cases := []struct {
		name string
		edit func(*Config)
	}{
		{"no dir", func(c *Config) { c.Dir = "" }},
		{"no token", func(c *Config) { c.Token = "" }},
		{"negative retention", func(c *Config) { c.Retention = -time.Hour }},
		{"negative hour retention", func(c *Config) { c.HourRetention = -time.Hour }},
		{"day tier shorter than hour tier", func(c *Config) { c.HourRetention = 48 * time.Hour; c.DayRetention = 24 * time.Hour }},
	}
	for _, c := range cases {
		cfg := testConfig(t, t.TempDir(), clock)
		c.edit(&cfg)
		if a, err := Open(cfg); err == nil {
			a.Close()
			t.Errorf("%s: Open succeeded; want an error", c.name)
		}
	}
	cfg, err := testConfig(t, t.TempDir(), clock).withDefaults()
	if err != nil {
		t.Fatalf("withDefaults: %v", err)
	}
	if cfg.Retention != DefaultRetention || cfg.HourRetention != DefaultHourRetention ||
		cfg.DayRetention != DefaultDayRetention || cfg.MaxBatchBytes != DefaultMaxBatchBytes {
		t.Errorf("defaults: got %v %v %v %d; want %v %v %v %d", cfg.Retention, cfg.HourRetention, cfg.DayRetention,
			cfg.MaxBatchBytes, DefaultRetention, DefaultHourRetention, DefaultDayRetention, DefaultMaxBatchBytes)
	}
}
