package ingest

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// fakeClock is an injectable clock that only moves when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func testLogger(t testing.TB) *slog.Logger {
	t.Helper()
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(string(b))
	return len(b), nil
}

// openTestPipeline opens a pipeline in a fresh folder and closes it when
// the test ends.
func openTestPipeline(t testing.TB, mutate func(*Config)) *Pipeline {
	t.Helper()
	cfg := Config{
		Dir:          t.TempDir(),
		NodeID:       "node-a",
		Region:       "eu",
		SyncInterval: 10 * time.Millisecond,
		Logger:       testLogger(t),
		Metrics:      metrics.NewSet(),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sealedFiles lists <seq>.seg files in dir, oldest first.
func sealedFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+sealedSuffix))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(m)
	return m
}

// readSealed decodes every event of every sealed segment in dir.
func readSealed(t testing.TB, dir string) []Event {
	t.Helper()
	var out []Event
	for _, f := range sealedFiles(t, dir) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ReadSegment(b, func(ev *Event) error {
			c := *ev
			c.Props = append([]Prop(nil), ev.Props...)
			out = append(out, c)
			return nil
		}); err != nil {
			t.Fatalf("ReadSegment(%s): %v", filepath.Base(f), err)
		}
	}
	return out
}

func sampleClick() Event {
	return Event{
		Kind: KindClick, Flags: FlagBot,
		ID:          [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		Time:        1_780_000_000_000,
		VisitorHash: 0xfeedfacecafebeef,
		Code:        "aB3dE7x", Node: "node-a", Region: "eu",
		ReferrerHost: "news.ycombinator.com",
		UTMSource:    "hn", UTMMedium: "social", UTMCampaign: "launch",
		Country: "DE", Subdivision: "DE-BE", City: "2950159",
		Device: "desktop", Browser: "Firefox", BrowserVersion: "128.0", OS: "Linux",
	}
}

func sampleSiteEvent() Event {
	return Event{
		Kind: KindEngagement, Flags: FlagNonInteractive,
		ID:          [16]byte{9: 9},
		Time:        1_780_000_000_123,
		VisitorHash: 42,
		SiteID:      "site1", Name: "engagement", Node: "node-a", Region: "eu",
		Path: "/blog/hello", ReferrerHost: "google.com",
		UTMSource: "newsletter", UTMTerm: "t", UTMContent: "c",
		Country: "FR", Subdivision: "FR-IDF", City: "2988507",
		Device: "mobile", Browser: "Safari", BrowserVersion: "17.4", OS: "iOS", OSVersion: "17.4",
		EngagedMS: 12_345, ScrollDepth: 87,
		Props: []Prop{{"plan", "pro"}, {"variant", "b"}},
	}
}

func readFile(t testing.TB, path string) ([]byte, error) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b, nil
}

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
