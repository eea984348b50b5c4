package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// fillStore writes a bit of every table so snapshots cover them all.
func fillStore(t *testing.T, s *Store, links int) { fillStoreTB(t, s, links) }

func fillStoreTB(t testing.TB, s *Store, links int) {
	t.Helper()
	apply(t, s, 1, func(b *Batch) error {
		if err := b.SetSecret(testKey); err != nil {
			return err
		}
		if err := b.PutOwner(&Owner{ID: "own_1", Name: "Ada"}, HashAPIKey([]byte("k1"))); err != nil {
			return err
		}
		if err := b.PutSite(&Site{ID: "s1", Domain: "example.com", Owner: "own_1"}); err != nil {
			return err
		}
		if err := b.PutIdempotency("own_1", "idem", &sampleIdempotency[1]); err != nil {
			return err
		}
		_, _, err := b.AllocBlock("eu", 1000)
		return err
	})
	for i := range links {
		l := sampleLink(fmt.Sprintf("s%06d", i), "own_1", uint64(i+2))
		apply(t, s, uint64(i+2), func(b *Batch) error { return b.CreateLink(&l) })
	}
}

func snapshotBytes(t *testing.T, s *Store) []byte { return snapshotBytesTB(t, s) }

func snapshotBytesTB(t testing.TB, s *Store) []byte {
	t.Helper()
	v := s.View()
	defer v.Release()
	var buf bytes.Buffer
	n, err := v.WriteTo(&buf)
	if err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo reported %d bytes; wrote %d", n, buf.Len())
	}
	return buf.Bytes()
}

func sameContents(t *testing.T, got, want *Store) {
	t.Helper()
	g, w := dump(t, got), dump(t, want)
	if len(g) != len(w) {
		t.Fatalf("restored store holds %d keys; want %d", len(g), len(w))
	}
	for i := range g {
		if !bytes.Equal(g[i].k, w[i].k) || !bytes.Equal(g[i].v, w[i].v) {
			t.Fatalf("key %d: got %q=%x; want %q=%x", i, g[i].k, g[i].v, w[i].k, w[i].v)
		}
	}
}

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	src := newTestStore(t)
	fillStore(t, src, 200)
	snap := snapshotBytes(t, src)

	dst := newTestStore(t)
	// Whatever dst held before is replaced, not merged.
	fillLinks(t, dst, "stale", 5, 1)
	if err := dst.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	sameContents(t, dst, src)
	if idx, err := dst.AppliedIndex(); err != nil || idx != 201 {
		t.Fatalf("AppliedIndex after Restore = %d, %v; want 201", idx, err)
	}
	// The restored store is a working replica.
	if l := mustGetLink(t, dst, "s000042"); l.Index != 44 {
		t.Fatalf("restored link = %+v; want index 44", l)
	}
	links, _, err := dst.ListLinks("own_1", "", 3)
	if err != nil || len(links) != 3 || links[0].Code != "s000199" {
		t.Fatalf("ListLinks after Restore = %+v, %v; want newest s000199 first", links, err)
	}
	var blk Block
	apply(t, dst, 202, func(b *Batch) (err error) {
		blk, _, err = b.AllocBlock("eu", 10)
		return err
	})
	if blk.Start != 1000 {
		t.Fatalf("block after Restore = %+v; want it to continue at 1000", blk)
	}
	// A snapshot of the restored store is byte for byte the same stream.
	dst2 := newTestStore(t)
	if err := dst2.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if again := snapshotBytes(t, dst2); !bytes.Equal(again, snap) {
		t.Fatalf("snapshot of a restored store differs from the original (%d vs %d bytes)", len(again), len(snap))
	}
}

func TestSnapshotOfEmptyStore(t *testing.T) {
	src := newTestStore(t)
	snap := snapshotBytes(t, src)
	dst := newTestStore(t)
	fillLinks(t, dst, "stale", 2, 1)
	if err := dst.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatalf("Restore of an empty snapshot: %v", err)
	}
	if kvs := dump(t, dst); len(kvs) != 0 {
		t.Fatalf("store holds %d keys after restoring an empty snapshot; want 0", len(kvs))
	}
	if idx, err := dst.AppliedIndex(); err != nil || idx != 0 {
		t.Fatalf("AppliedIndex = %d, %v; want 0", idx, err)
	}
}

func TestSnapshotViewIsPointInTime(t *testing.T) {
	src := newTestStore(t)
	fillStore(t, src, 10)
	want := snapshotBytes(t, src)

	v := src.View()
	defer v.Release()
	fillLinks(t, src, "later", 5, 100)
	apply(t, src, 200, func(b *Batch) error {
		_, err := b.UpdateLink(&LinkPatch{Code: "s000003", SetStatus: true, Status: StatusBlocked}, 200)
		return err
	})
	var buf bytes.Buffer
	if _, err := v.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("view taken before the writes streams %d bytes; want the %d bytes of the store at that time", buf.Len(), len(want))
	}
}

func TestRestoreRejectsDamagedStreams(t *testing.T) {
	src := newTestStore(t)
	fillStore(t, src, 20)
	snap := snapshotBytes(t, src)

	bad := map[string][]byte{
		"empty":      nil,
		"bad magic":  append([]byte("WAYMARK-SNAP-0\n"), snap[len(snapshotMagic):]...),
		"extended":   append(bytes.Clone(snap), 0),
		"doubled":    append(bytes.Clone(snap), snap...),
		"huge chunk": append(bytes.Clone(snapshotMagic), 0xff, 0xff, 0xff, 0xff, 0x0f),
	}
	for _, n := range []int{1, len(snapshotMagic), len(snapshotMagic) + 1, len(snapshotMagic) + 3, len(snap) / 3, len(snap) / 2, len(snap) - 6, len(snap) - 5, len(snap) - 2, len(snap) - 1} {
		bad[fmt.Sprintf("truncated to %d of %d", n, len(snap))] = snap[:n]
	}
	// Flip one bit in the middle of a link's value, of a key, of a length
	// and of the trailer. The structure still parses for some of these; only
	// the checksum can tell.
	value := bytes.Index(snap, []byte("https://example.com/s000007"))
	key := bytes.Index(snap, []byte("Ls000011"))
	for what, off := range map[string]int{"value": value + 10, "key": key + 3, "key length": key - 1, "trailer": len(snap) - 3} {
		b := bytes.Clone(snap)
		b[off] ^= 0x04
		bad["flipped bit in "+what] = b
	}

	dst := newTestStore(t)
	for what, b := range bad {
		before, err := dst.AppliedIndex()
		if err != nil {
			t.Fatal(err)
		}
		if err := dst.Restore(bytes.NewReader(b)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Restore of %s stream: %v; want ErrCorrupt", what, err)
			continue
		}
		// A failed restore leaves the old state serving, untouched.
		if idx, err := dst.AppliedIndex(); err != nil || idx != before {
			t.Errorf("AppliedIndex after failed restore of %s = %d, %v; want %d", what, idx, err, before)
		}
		// A good restore in between must not be disturbed by the next bad one.
		if err := dst.Restore(bytes.NewReader(snap)); err != nil {
			t.Fatalf("good Restore after %s: %v", what, err)
		}
	}
	if err := dst.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatalf("good Restore after failed ones: %v", err)
	}
	sameContents(t, dst, src)
}

// A restore that fails part-way (here a cut stream) leaves the old state
// serving, every key of it, and no files of the attempt behind.
func TestFailedRestoreLeavesOldState(t *testing.T) {
	src := newTestStore(t)
	fillStore(t, src, 30)
	snap := snapshotBytes(t, src)

	dst := newTestStore(t)
	old := sampleLink("old0001", "own_2", 500)
	apply(t, dst, 500, func(b *Batch) error { return b.CreateLink(&old) })
	want := snapshotBytes(t, dst)
	if err := dst.Restore(bytes.NewReader(snap[:len(snap)*2/3])); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Restore of a cut stream: %v; want ErrCorrupt", err)
	}
	if got := snapshotBytes(t, dst); !bytes.Equal(got, want) {
		t.Fatalf("store after a failed restore differs from before it (%d bytes, want %d)", len(got), len(want))
	}
	if _, err := dst.fs.Stat(dst.fs.PathJoin(dst.dir, restoreDir)); err == nil {
		t.Errorf("failed restore left %s behind", restoreDir)
	}
}

// Readers never see an empty or half-filled store while a snapshot is
// installed: every code the store held before the restore, and that the
// snapshot holds too, is found by every read during the restore. Before
// the swap, Restore wiped the database first and refilled it in place.
func TestRestoreKeepsServingReads(t *testing.T) { testRestoreKeepsServingReads(t) }

// TestRestoreKeepsServingReadsAcrossTables is the same with a snapshot
// written into hundreds of small tables, whose deleted spans must tile the
// key space between them.
func TestRestoreKeepsServingReadsAcrossTables(t *testing.T) {
	old := restoreTableBytes
	restoreTableBytes = 4096
	t.Cleanup(func() { restoreTableBytes = old })
	testRestoreKeepsServingReads(t)
}

func testRestoreKeepsServingReads(t *testing.T) {
	const links = 20000
	src := newTestStore(t)
	fillStore(t, src, links)
	snap := snapshotBytes(t, src)

	dst := newTestStore(t)
	fillStore(t, dst, links/2) // a replica that fell behind: half the links
	stop := make(chan struct{})
	done := make(chan error, 1)
	var reads int
	go func() {
		var l Link
		for i := 0; ; i = (i + 7919) % (links / 2) {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			code := fmt.Sprintf("s%06d", i)
			found, err := dst.GetLink([]byte(code), &l)
			if err != nil || !found {
				done <- fmt.Errorf("read %d: GetLink(%s) during restore = found %v, err %v", reads, code, found, err)
				return
			}
			reads++
		}
	}()
	for range 3 {
		if err := dst.Restore(bytes.NewReader(snap)); err != nil {
			t.Fatalf("Restore: %v", err)
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	sameContents(t, dst, src)
	t.Logf("%d reads during 3 restores of %d links, none missed", reads, links)
}

// sealSnapshot builds a stream in the WriteTo format from raw pairs, with a
// correct trailer, so tests can feed Restore well-formed but unusual input.
func sealSnapshot(pairs ...[2]string) []byte {
	b := append([]byte(nil), snapshotMagic...)
	for _, p := range pairs {
		b = AppendString(b, p[0])
		b = AppendString(b, p[1])
	}
	b = append(b, 0)
	b = appendUvarint(b, uint64(len(pairs)))
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func TestRestoreRejectsUnsortedKeys(t *testing.T) {
	dst := newTestStore(t)
	if err := dst.Restore(bytes.NewReader(sealSnapshot([2]string{"La", "1"}, [2]string{"Lb", "2"}))); err != nil {
		t.Fatalf("Restore of a sealed sorted stream: %v", err)
	}
	for name, snap := range map[string][]byte{
		"unsorted":     sealSnapshot([2]string{"Lb", "1"}, [2]string{"La", "2"}),
		"duplicate":    sealSnapshot([2]string{"La", "1"}, [2]string{"La", "2"}),
		"past the end": sealSnapshot([2]string{"\xff\xff\x01", "1"}),
	} {
		if err := dst.Restore(bytes.NewReader(snap)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Restore of %s keys: %v; want ErrCorrupt", name, err)
		}
	}
}

// FuzzRestore feeds arbitrary streams to Restore: it must never panic, must
// fail only with ErrCorrupt, and a stream it accepts must be exactly what
// WriteTo writes for the restored store.
func FuzzRestore(f *testing.F) {
	src := newTestStore(f)
	fillStoreTB(f, src, 3)
	good := snapshotBytesTB(f, src)
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(sealSnapshot())
	f.Add(sealSnapshot([2]string{"Mapplied", "\x00\x00\x00\x00\x00\x00\x00\x09"}, [2]string{"Mx", ""}))
	f.Add(append(bytes.Clone(snapshotMagic), 0))
	f.Add([]byte{})
	dst := newTestStore(f)
	f.Fuzz(func(t *testing.T, stream []byte) {
		err := dst.Restore(bytes.NewReader(stream))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Restore: %v; want ErrCorrupt", err)
			}
			return
		}
		if again := snapshotBytesTB(t, dst); !bytes.Equal(again, stream) {
			t.Fatalf("accepted stream %x re-snapshots as %x", stream, again)
		}
	})
}

// A crash part-way through a restore leaves restore.tmp/ inside the
// database directory: Pebble opens beside it, the old state serves, and
// the next restore clears it.
func TestRestoreAfterCrashLeftTempFiles(t *testing.T) {
	src := newTestStore(t)
	fillStore(t, src, 10)
	snap := snapshotBytes(t, src)

	dir := t.TempDir()
	dst := openStore(t, dir)
	old := sampleLink("old0001", "own_2", 500)
	apply(t, dst, 500, func(b *Batch) error { return b.CreateLink(&old) })
	want := snapshotBytes(t, dst)
	closeStore(t, dst)
	tmp := filepath.Join(dir, restoreDir)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "000000.sst"), []byte("half a table"), 0o644); err != nil {
		t.Fatal(err)
	}
	dst = openStore(t, dir)
	if got := snapshotBytes(t, dst); !bytes.Equal(got, want) {
		t.Fatalf("store reopened beside a crashed restore differs from before it")
	}
	if err := dst.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	sameContents(t, dst, src)
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("%s still there after a good restore: %v", tmp, err)
	}
}
