package rollup

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// crash stops a as a killed process would: the database closes with what
// its synced commits hold, and nothing pending is written.
func crash(t *testing.T, a *Aggregator) {
	t.Helper()
	a.life.Lock()
	a.closed = true
	a.life.Unlock()
	close(a.stop)
	<-a.done
	if err := a.db.Close(); err != nil {
		t.Fatalf("close database: %v", err)
	}
	a.cache.Unref()
}

// journalEntries counts the journal's entries.
func journalEntries(t *testing.T, a *Aggregator) int {
	t.Helper()
	it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tabJournal}, UpperBound: []byte{tabJournal + 1}})
	if err != nil {
		t.Fatalf("NewIter: %v", err)
	}
	defer it.Close()
	n := 0
	for it.First(); it.Valid(); it.Next() {
		n++
	}
	return n
}

// TestCrashBeforeCheckpoint: acknowledged segments whose rollups were
// still in memory when the process died are folded again from the journal
// at start, exactly once: after two crashes (and resent segments) every
// metric matches the reference computed from the raw events.
func TestCrashBeforeCheckpoint(t *testing.T) {
	w := generate(1)
	cfg := testConfig(t, t.TempDir(), &testClock{now: base})
	cfg.CheckpointInterval, cfg.CheckpointEvents = time.Hour, 1<<30 // only reads and crashes end a checkpoint
	a := openTest(t, cfg)
	srv := startServer(t, a)
	segs := w.Segments("edge-1", 97)
	third := len(segs) / 3
	for _, s := range segs[:third] {
		srv.ship(t, s)
	}
	if n := journalEntries(t, a); n != third {
		t.Fatalf("journal before the crash: %d entries; want %d (one per applied segment)", n, third)
	}
	crash(t, a)

	a = openTest(t, cfg)
	srv.agg.Store(a)
	if got := a.m.journalReplayed.Get(); got != uint64(third) {
		t.Errorf("segments folded again at start: %d; want %d", got, third)
	}
	if n := journalEntries(t, a); n != 0 {
		t.Errorf("journal after the start-up checkpoint: %d entries; want 0", n)
	}
	for i := third; i < 2*third; i += 2 {
		srv.ship(t, segs[i:min(i+2, 2*third)]...)
	}
	srv.ship(t, segs[:3]...) // retries of segments applied before the first crash
	crash(t, a)

	a = openTest(t, cfg)
	srv.agg.Store(a)
	for _, s := range segs[2*third:] {
		srv.ship(t, s)
	}
	srv.ship(t, segs[third:third+3]...) // retries of segments refolded after the second crash
	for _, r := range worldRanges(t) {
		checkSite(t, a, w, r)
		checkLink(t, a, w, r)
	}
	wantCount(t, a, Filter{}, uint64(len(w.Events)))
	if n := journalEntries(t, a); n != 0 {
		t.Errorf("journal after the reads' checkpoint: %d entries; want 0", n)
	}
}

// TestCheckpointByAge: an aggregator that stops receiving writes what it
// folded within its checkpoint interval, without a read asking for it.
func TestCheckpointByAge(t *testing.T) {
	w := generate(2)
	cfg := testConfig(t, t.TempDir(), &testClock{now: base})
	cfg.CheckpointInterval = 50 * time.Millisecond
	a := openTest(t, cfg)
	srv := startServer(t, a)
	segs := w.Segments("edge-1", 97)
	srv.ship(t, segs[:4]...)
	deadline := time.Now().Add(10 * time.Second)
	for a.pendingEvents.Load() != 0 || a.m.checkpoints.Get() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint 10 s after the last batch: %d events pending", a.pendingEvents.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := journalEntries(t, a); n != 0 {
		t.Errorf("journal after the checkpoint: %d entries; want 0", n)
	}
}
