package ingest

import (
	"bytes"
	"context"
	"testing"
)

// TestEventIDsFollowArrival: ids minted by one writer grow in the order the
// events reached it, also in the same millisecond and across a restart, so
// the aggregator orders a visitor's same-millisecond events as they came.
func TestEventIDsFollowArrival(t *testing.T) {
	dir := t.TempDir()
	var all []Event
	for range 2 {
		p := openTestPipeline(t, func(c *Config) { c.Dir = dir })
		for range 50 {
			p.CaptureClick(clickCtx("http://wm.example/c", "203.0.113.7", nil), []byte("c"))
		}
		if err := p.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	all = readSealed(t, dir)
	if len(all) != 100 {
		t.Fatalf("got %d events; want 100", len(all))
	}
	for i := 1; i < len(all); i++ {
		if bytes.Compare(all[i-1].ID[:8], all[i].ID[:8]) >= 0 {
			t.Fatalf("event %d has id %x, not after event %d's %x", i, all[i].ID, i-1, all[i-1].ID)
		}
		if bytes.Equal(all[i-1].ID[8:], all[i].ID[8:]) {
			t.Fatalf("events %d and %d share their random half %x", i-1, i, all[i].ID[8:])
		}
	}
}
