package ingest

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// TestSlowFsyncDoesNotStallWriter holds every fsync until released: the
// writer must keep writing events and rotating segments meanwhile, and no
// segment may be sealed (visible to the shipper) before its fsync.
func TestSlowFsyncDoesNotStallWriter(t *testing.T) {
	p, err := newPipeline(Config{
		Dir: t.TempDir(), NodeID: "node-a", Region: "eu",
		SyncInterval: 5 * time.Millisecond, SegmentMaxBytes: 4096,
		Logger: testLogger(t), Metrics: metrics.NewSet(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var syncs atomic.Int32
	release := startWithHeldFsyncs(t, p, func() bool { syncs.Add(1); return true })

	ctx := clickCtx("http://wm.example/c", "203.0.113.7", nil)
	p.CaptureClick(ctx, []byte("c"))
	waitFor(t, "the syncer to be stuck in an fsync", func() bool { return syncs.Load() >= 1 })

	const more = 1000
	for range more {
		p.CaptureClick(ctx, []byte("c"))
	}
	waitFor(t, "the writer to write every event during the fsync", func() bool { return p.m.written.Get() == more+1 })
	if open, _ := filepath.Glob(filepath.Join(p.cfg.Dir, "*"+openSuffix)); len(open) < 5 {
		t.Errorf("got %d open segments; want the writer to have rotated several times (4 KiB segments)", len(open))
	}
	if sealed := sealedFiles(t, p.cfg.Dir); len(sealed) != 0 {
		t.Fatalf("got %d sealed segments before any fsync finished; want 0", len(sealed))
	}

	release()
	events := closeAndRead(t, p)
	if len(events) != more+1 {
		t.Fatalf("got %d events; want %d", len(events), more+1)
	}
	if open, _ := filepath.Glob(filepath.Join(p.cfg.Dir, "*"+openSuffix)); len(open) != 0 {
		t.Errorf("open segments left after Close: %v", open)
	}
}

// TestSyncerGroupCommit: bytes the writer flushed are fsynced by the
// syncer's own ticker, without a seal.
func TestSyncerGroupCommit(t *testing.T) {
	p, err := newPipeline(Config{
		Dir: t.TempDir(), NodeID: "node-a", SyncInterval: 2 * time.Millisecond,
		SegmentMaxAge: time.Hour, Logger: testLogger(t), Metrics: metrics.NewSet(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var synced atomic.Pointer[string]
	p.seg.syncer.syncFile = func(f *os.File) error {
		name := filepath.Base(f.Name())
		synced.Store(&name)
		return f.Sync()
	}
	p.start()
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	p.CaptureClick(clickCtx("http://wm.example/c", "203.0.113.7", nil), []byte("c"))
	waitFor(t, "a group-commit fsync of the open segment", func() bool {
		n := synced.Load()
		return n != nil && filepath.Ext(*n) == openSuffix
	})
	if sealed := sealedFiles(t, p.cfg.Dir); len(sealed) != 0 {
		t.Errorf("got %d sealed segments; want the group commit not to seal", len(sealed))
	}
}

// TestOldestPendingDuringSeal holds the seal's fsync: while the sealed
// segment is neither open nor renamed, the oldest-pending gauge still
// counts it (it read 0 there, and /readyz missed a stalled shipper).
func TestOldestPendingDuringSeal(t *testing.T) {
	clock := newFakeClock()
	p, err := newPipeline(Config{
		Dir: t.TempDir(), NodeID: "node-a", Region: "eu", Now: clock.Now,
		SyncInterval: 5 * time.Millisecond, SegmentMaxAge: time.Minute,
		Logger: testLogger(t), Metrics: metrics.NewSet(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var hold atomic.Bool
	release := startWithHeldFsyncs(t, p, hold.Load)

	p.CaptureClick(clickCtx("http://wm.example/c", "203.0.113.7", nil), []byte("c"))
	waitFor(t, "the event to be written", func() bool { return p.m.written.Get() == 1 })
	hold.Store(true)
	clock.Advance(time.Minute)
	waitFor(t, "the writer to hand the segment to the syncer", func() bool { return p.openCreatedMs.Load() == 0 })
	if len(sealedFiles(t, p.cfg.Dir)) != 0 {
		t.Fatal("the segment was renamed before its fsync")
	}
	if age := p.OldestPendingAge(); age != time.Minute {
		t.Errorf("during the seal's fsync: oldest pending age %v; want 1m", age)
	}
	release()
	waitFor(t, "the segment to be sealed", func() bool { return len(sealedFiles(t, p.cfg.Dir)) == 1 })
	clock.Advance(time.Second)
	if age := p.OldestPendingAge(); age != time.Minute+time.Second {
		t.Errorf("after the seal: oldest pending age %v; want 1m1s", age)
	}
}

// startWithHeldFsyncs starts p with each fsync for which held() says so
// waiting until release is called (by the test, or at cleanup, before p
// closes).
func startWithHeldFsyncs(t *testing.T, p *Pipeline, held func() bool) (release func()) {
	ch := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	p.seg.syncer.syncFile = func(f *os.File) error {
		if held() {
			<-ch
		}
		return f.Sync()
	}
	p.start()
	t.Cleanup(func() {
		release()
		_ = p.Close(context.Background())
	})
	return release
}
