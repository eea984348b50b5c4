package ingest

import (
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

func newTestWriter(t testing.TB, dir string, maxBytes int64) *segmentWriter {
	t.Helper()
	w := &segmentWriter{
		dir: dir, nodeID: "node-a", maxBytes: maxBytes, maxAge: time.Hour, capBytes: 1 << 40,
		now: time.Now, log: slog.New(slog.DiscardHandler), pending: new(atomic.Int64),
	}
	if err := w.recoverDir(); err != nil {
		t.Fatalf("recoverDir: %v", err)
	}
	return w
}

func appendN(t testing.TB, w *segmentWriter, n int) {
	t.Helper()
	for i := range n {
		ev := sampleClick()
		ev.Time = int64(i)
		if err := w.append(&ev); err != nil {
			t.Fatalf("append: %v", err)
		}
	}
}

// TestTornTailRecovery writes an open segment, cuts bytes off its end as a
// crash mid-write would, and reopens: only whole records may remain, and
// the result is a sealed, readable segment.
func TestTornTailRecovery(t *testing.T) {
	const records = 5
	probe := newTestWriter(t, t.TempDir(), 1<<20)
	appendN(t, probe, records)
	if err := probe.flush(); err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile(probe.f.Name())
	if err != nil {
		t.Fatal(err)
	}
	probe.f.Close()
	_, headerLen, _ := parseSegmentHeader(full)
	recordLen := (len(full) - headerLen) / records

	for cut := 0; cut <= len(full)-headerLen+3; cut += 7 {
		dir := t.TempDir()
		torn := full[:len(full)-cut]
		if err := os.WriteFile(filepath.Join(dir, segmentName(1, openSuffix)), torn, 0o644); err != nil {
			t.Fatal(err)
		}
		w := newTestWriter(t, dir, 1<<20)
		wantRecords := max(len(torn)-headerLen, 0) / recordLen
		got := readSealed(t, dir)
		if len(got) != wantRecords {
			t.Errorf("cut %d bytes: got %d records; want %d", cut, len(got), wantRecords)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, "*"+openSuffix)); len(left) != 0 {
			t.Errorf("cut %d bytes: open segments left: %v", cut, left)
		}
		if wantRecords == 0 && len(sealedFiles(t, dir)) != 0 {
			t.Errorf("cut %d bytes: sealed an empty segment", cut)
		}
		if w.nextSeq <= 1 {
			t.Errorf("cut %d bytes: next seq %d reuses the recovered one", cut, w.nextSeq)
		}
	}
}

// TestRecoverSealsOpenSegmentWithFooter covers a crash after the footer was
// written but before the rename.
func TestRecoverSealsOpenSegmentWithFooter(t *testing.T) {
	dir := t.TempDir()
	seg := buildSegment(threeEvents(), true)
	// buildSegment uses seq 7.
	if err := os.WriteFile(filepath.Join(dir, segmentName(7, openSuffix)), seg, 0o644); err != nil {
		t.Fatal(err)
	}
	w := newTestWriter(t, dir, 1<<20)
	if got := len(readSealed(t, dir)); got != 3 {
		t.Fatalf("got %d events; want 3", got)
	}
	if w.pending.Load() != int64(len(seg)) {
		t.Errorf("got pending %d; want %d", w.pending.Load(), len(seg))
	}
}

// TestSequenceNeverReused: after every segment has shipped and been deleted,
// a restart must not hand out an old sequence number again, or the
// aggregator would drop the new segment as a duplicate.
func TestSequenceNeverReused(t *testing.T) {
	dir := t.TempDir()
	w := newTestWriter(t, dir, 1<<20)
	appendN(t, w, 3)
	if err := w.seal(); err != nil {
		t.Fatal(err)
	}
	used := w.seq
	for _, f := range sealedFiles(t, dir) {
		os.Remove(f)
	}
	w2 := newTestWriter(t, dir, 1<<20)
	appendN(t, w2, 1)
	if w2.seq <= used {
		t.Fatalf("got seq %d after restart; want > %d", w2.seq, used)
	}
}

func TestRotationBySize(t *testing.T) {
	dir := t.TempDir()
	const maxBytes = 1024
	w := newTestWriter(t, dir, maxBytes)
	appendN(t, w, 100)
	if err := w.close(); err != nil {
		t.Fatal(err)
	}
	files := sealedFiles(t, dir)
	if len(files) < 5 {
		t.Fatalf("got %d segments; want several", len(files))
	}
	for _, f := range files {
		info, _ := os.Stat(f)
		if info.Size() > maxBytes {
			t.Errorf("%s is %d bytes; want <= %d", filepath.Base(f), info.Size(), maxBytes)
		}
	}
	if got := len(readSealed(t, dir)); got != 100 {
		t.Errorf("got %d events; want 100", got)
	}
	var total int64
	for _, f := range files {
		info, _ := os.Stat(f)
		total += info.Size()
	}
	if w.pending.Load() != total {
		t.Errorf("got pending %d; want %d on disk", w.pending.Load(), total)
	}
}

func TestCloseRemovesEmptySegment(t *testing.T) {
	dir := t.TempDir()
	w := newTestWriter(t, dir, 1<<20)
	if err := w.openSegment(); err != nil {
		t.Fatal(err)
	}
	if err := w.close(); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.open")); len(m) != 0 || len(sealedFiles(t, dir)) != 0 {
		t.Fatalf("got files %v after closing an empty segment; want none", m)
	}
	if w.pending.Load() != 0 {
		t.Errorf("got pending %d; want 0", w.pending.Load())
	}
}

func BenchmarkSegmentAppend(b *testing.B) {
	w := newTestWriter(b, b.TempDir(), 8<<20)
	ev := sampleClick()
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		if err := w.append(&ev); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
	b.StopTimer()
	_ = w.close()
}

// TestDiskCapCountsHeaderAndFooter: the byte cap holds for what is on
// disk, so an event is refused when its frame plus the header of the
// segment it would open plus that segment's footer do not fit.
func TestDiskCapCountsHeaderAndFooter(t *testing.T) {
	probe := newTestWriter(t, t.TempDir(), 1<<20)
	ev := sampleClick()
	if err := probe.append(&ev); err != nil {
		t.Fatal(err)
	}
	one := probe.pending.Load() + footerLen // header + one frame + footer
	_ = probe.close()
	for _, tc := range []struct {
		capBytes int64
		want     error
	}{{one - 1, errDiskCap}, {one + recordOverhead, nil}} { // a frame is estimated at its largest
		w := newTestWriter(t, t.TempDir(), 1<<20)
		w.capBytes = tc.capBytes
		if err := w.append(&ev); err != tc.want {
			t.Errorf("cap %d (one event needs %d): got %v; want %v", tc.capBytes, one, err, tc.want)
		}
		_ = w.close()
		if w.pending.Load() > tc.capBytes {
			t.Errorf("cap %d: %d bytes pending after sealing", tc.capBytes, w.pending.Load())
		}
	}
}
