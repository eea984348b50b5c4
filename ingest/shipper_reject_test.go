package ingest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// firstSeq is the sequence number of the first segment in a fresh folder.
const firstSeq = 1

// TestShipperSetsAsideMalformed: a segment the aggregator refuses as
// malformed is moved to .bad, counted and reported, and never sent again;
// the rest of the backlog ships.
func TestShipperSetsAsideMalformed(t *testing.T) {
	agg := newFakeAggregator(t, "ack")
	agg.refuse[firstSeq] = RejectMalformed
	p := shipPipeline(t, agg)
	captureN(p, 120)
	waitFor(t, "every event written", func() bool { return p.m.written.Get() == 120 })
	waitFor(t, "nothing pending", func() bool { return p.PendingBytes() == 0 })
	bad := filepath.Join(p.cfg.Dir, segmentName(firstSeq, badSuffix))
	if _, err := os.Stat(bad); err != nil {
		t.Fatalf("refused segment not set aside: %v", err)
	}
	if n := len(readSealed(t, p.cfg.Dir)); n != 0 {
		t.Fatalf("%d events still in sealed segments; want 0", n)
	}
	stored := agg.events()
	if stored == 0 || stored >= 120 {
		t.Fatalf("got %d events at the aggregator; want all but the refused segment's", stored)
	}
	if got := p.ship.m.rejected[RejectMalformed].Get(); got != 1 {
		t.Errorf("waymark_ingest_segments_rejected_total{reason=malformed} = %d; want 1", got)
	}
	st := p.ShipStatus()
	if st.BadSegments != 1 || st.OldestBad != filepath.Base(bad) || st.RejectedMalformed != 1 {
		t.Errorf("ShipStatus: %+v; want one bad segment, %s", st, filepath.Base(bad))
	}
	// More rounds run (new events wake the shipper); the refused one
	// stays where it is.
	captureN(p, 30)
	waitFor(t, "new events shipped", func() bool { return p.m.written.Get() == 150 && p.PendingBytes() == 0 })
	if n := agg.sentCount(firstSeq); n != 1 {
		t.Errorf("refused segment sent %d times; want 1", n)
	}
}

// TestShipperPartialAckKeepsShipping: a segment the aggregator never
// answers for does not hold up the segments after it, and a 200 answer
// never puts the shipper into backoff. It is retried later.
func TestShipperPartialAckKeepsShipping(t *testing.T) {
	agg := newFakeAggregator(t, "ack")
	agg.silent[firstSeq] = true
	p := openTestPipeline(t, func(c *Config) {
		c.AggregatorURL = agg.srv.URL
		c.ShipToken = "s3cret"
		c.SegmentMaxBytes = 1024
		c.SegmentMaxAge = 20 * time.Millisecond
		c.ShipBatchMaxBytes = 1 // one segment per request: the silent one first
		c.ShipMaxBackoff = time.Minute
	})
	captureN(p, 150)
	waitFor(t, "every event written", func() bool { return p.m.written.Get() == 150 })
	first := filepath.Join(p.cfg.Dir, segmentName(firstSeq, sealedSuffix))
	waitFor(t, "all but the unanswered segment shipped", func() bool {
		files := sealedFiles(t, p.cfg.Dir)
		return len(files) == 1 && files[0] == first
	})
	if got := p.m.shipRetries.Get(); got != 0 {
		t.Errorf("shipper backed off %d times after 200 answers; want 0", got)
	}
	waitFor(t, "the unanswered segment sent again", func() bool { return agg.sentCount(firstSeq) >= 2 })
	agg.mu.Lock()
	delete(agg.silent, firstSeq)
	agg.mu.Unlock()
	waitFor(t, "everything acknowledged", func() bool { return p.PendingBytes() == 0 })
	if got := agg.events(); got != 150 {
		t.Errorf("got %d events at the aggregator; want 150", got)
	}
}

// TestShipperChecksEveryRecord: a sealed segment whose framing and CRCs
// are fine but whose record does not decode is set aside before it is
// ever sent.
func TestShipperChecksEveryRecord(t *testing.T) {
	dir := t.TempDir()
	ev := sampleClick()
	seg := appendSegmentHeader(nil, "node-a", 5, firstSeq, time.Now())
	seg = appendRecord(seg, AppendEvent(nil, &ev))
	seg = appendRecord(seg, []byte{9, 9, 9}) // good CRC, not an event
	seg = appendFooter(seg, 2)
	writeFile(t, filepath.Join(dir, segmentName(firstSeq, sealedSuffix)), seg)

	agg := newFakeAggregator(t, "ack")
	p := openTestPipeline(t, func(c *Config) {
		c.Dir = dir
		c.AggregatorURL = agg.srv.URL
		c.ShipToken = "s3cret"
		c.SegmentMaxAge = 20 * time.Millisecond
	})
	captureN(p, 10)
	waitFor(t, "new events shipped", func() bool { return agg.events() == 10 })
	waitFor(t, "nothing pending", func() bool { return p.PendingBytes() == 0 })
	if n := agg.sentCount(firstSeq); n != 0 {
		t.Errorf("undecodable segment sent %d times; want 0", n)
	}
	if _, err := os.Stat(filepath.Join(dir, segmentName(firstSeq, badSuffix))); err != nil {
		t.Errorf("undecodable segment not set aside: %v", err)
	}
	if got := p.m.corruptSegments.Get(); got != 1 {
		t.Errorf("corrupt segments: got %d; want 1", got)
	}
}

// TestShipperConflictAfterSnapshotRestore: a folder restored from a
// snapshot reuses its incarnation and sequence numbers for new events.
// The aggregator refuses those as conflicts; the shipper moves to a new
// incarnation, rewrites each such segment under it with its records
// unchanged, and every event is stored exactly once.
func TestShipperConflictAfterSnapshotRestore(t *testing.T) {
	agg := newFakeAggregator(t, "ack")
	dir := t.TempDir()
	open := func() *Pipeline {
		return openTestPipeline(t, func(c *Config) {
			c.Dir = dir
			c.AggregatorURL = agg.srv.URL
			c.ShipToken = "s3cret"
			c.SegmentMaxBytes = 1024
			c.SegmentMaxAge = 20 * time.Millisecond
			c.ShipMaxBackoff = 20 * time.Millisecond
		})
	}
	run := func(n int) *Pipeline {
		p := open()
		captureN(p, n)
		waitFor(t, "every event written", func() bool { return p.m.written.Get() == uint64(n) })
		waitFor(t, "everything acknowledged", func() bool { return p.PendingBytes() == 0 })
		return p
	}
	close := func(p *Pipeline) {
		if err := p.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	close(run(40))
	snapshot := copyDir(t, dir)
	inc, err := readIncarnation(filepath.Join(dir, incarnationFileName))
	if err != nil {
		t.Fatal(err)
	}

	close(run(40)) // after the snapshot: shipped under (inc, seqs from the snapshot's next-seq)
	if agg.conflicts != 0 {
		t.Fatalf("%d conflicts before the restore; want 0", agg.conflicts)
	}

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(snapshot, dir); err != nil {
		t.Fatal(err)
	}
	p := run(40) // the restored folder: same incarnation, same seqs, new events
	if got := agg.events(); got != 120 {
		t.Fatalf("got %d events at the aggregator; want 120", got)
	}
	agg.mu.Lock()
	conflicts := agg.conflicts
	agg.mu.Unlock()
	if conflicts == 0 {
		t.Fatal("no conflicts: the restored folder did not reuse identities, so the test shows nothing")
	}
	if got := p.ship.m.rejected[RejectConflict].Get(); got != uint64(conflicts) {
		t.Errorf("conflict counter %d; want %d", got, conflicts)
	}
	now, err := readIncarnation(filepath.Join(dir, incarnationFileName))
	if err != nil || now == inc || now == 0 {
		t.Fatalf("incarnation on disk %d (err %v); want a new nonzero one, not %d", now, err, inc)
	}
	if got := p.ship.m.rotations.Get(); got != 1 {
		t.Errorf("incarnation rotations: %d; want 1", got)
	}
	// Each conflicting segment arrived again under the new incarnation,
	// with the same seq and the same records byte for byte.
	agg.mu.Lock()
	defer agg.mu.Unlock()
	for seq, records := range agg.conflicted {
		got, ok := agg.records[SegmentRef{Node: "node-a", Inc: now, Seq: seq}]
		if !ok {
			t.Errorf("segment %d not stored under the new incarnation", seq)
		} else if !bytes.Equal(got, records) {
			t.Errorf("segment %d: records changed when it was re-identified", seq)
		}
	}
	if agg.resent != 0 {
		t.Errorf("%d acknowledged segments sent again; want 0", agg.resent)
	}
}

// copyDir copies the regular files of dir to a new folder next to it.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	out := dir + ".snapshot"
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(out, e.Name()), b)
	}
	return out
}

// TestShipperConflictTwiceBacksOff: a segment already rewritten under a
// fresh incarnation cannot really conflict again; if the aggregator says
// so anyway, the shipper does not rotate in a loop but sends it again
// later, with a growing wait, and the rest ships.
func TestShipperConflictTwiceBacksOff(t *testing.T) {
	agg := newFakeAggregator(t, "ack")
	agg.refuse[firstSeq] = RejectConflict
	p := openTestPipeline(t, func(c *Config) {
		c.AggregatorURL = agg.srv.URL
		c.ShipToken = "s3cret"
		c.SegmentMaxBytes = 1024
		c.SegmentMaxAge = 20 * time.Millisecond
		c.ShipMaxBackoff = time.Minute
	})
	captureN(p, 60)
	first := filepath.Join(p.cfg.Dir, segmentName(firstSeq, sealedSuffix))
	waitFor(t, "all but the refused segment shipped", func() bool {
		files := sealedFiles(t, p.cfg.Dir)
		return p.m.written.Get() == 60 && len(files) == 1 && files[0] == first
	})
	waitFor(t, "the refused segment sent three times", func() bool { return agg.sentCount(firstSeq) >= 3 })
	agg.mu.Lock()
	at := agg.sentAt[firstSeq]
	agg.mu.Unlock()
	// Sent, refused, re-identified and sent at once, refused again: then
	// it waits (a second) before the third try.
	if gap := at[2].Sub(at[1]); gap < 900*time.Millisecond {
		t.Errorf("third send %v after the second; want the retry wait (1s) in between", gap)
	}
	if got := p.ship.m.rotations.Get(); got != 1 {
		t.Errorf("incarnation rotated %d times; want 1", got)
	}
	if got := p.m.shipRetries.Get(); got != 0 {
		t.Errorf("shipper backed off %d times after 200 answers; want 0", got)
	}
}
