package ingest

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestIncarnationMadeWithFolder: a new segment folder gets a random
// nonzero incarnation on disk that every segment header carries; a
// reopen keeps it, a wiped folder gets a new one.
func TestIncarnationMadeWithFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "segments")
	headerInc := func() uint64 {
		w := newTestWriter(t, dir, 1<<20)
		appendN(t, w, 3)
		if err := w.close(); err != nil {
			t.Fatal(err)
		}
		files := sealedFiles(t, dir)
		b, _ := readFile(t, files[len(files)-1])
		h, err := ReadSegment(b, func(*Event) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		onDisk, err := readIncarnation(filepath.Join(dir, incarnationFileName))
		if err != nil || onDisk != h.Incarnation || h.Version != segmentVersion2 {
			t.Fatalf("header incarnation %d (version %d), on disk %d (%v); want the same, version 2", h.Incarnation, h.Version, onDisk, err)
		}
		return h.Incarnation
	}
	first := headerInc()
	if first == 0 {
		t.Fatal("incarnation 0; want nonzero")
	}
	if again := headerInc(); again != first {
		t.Fatalf("reopened folder: incarnation %d; want %d", again, first)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if wiped := headerInc(); wiped == first || wiped == 0 {
		t.Fatalf("wiped folder: incarnation %d; want a new nonzero one", wiped)
	}
}

func TestIncarnationDamagedFileReplaced(t *testing.T) {
	dir := t.TempDir()
	w := newTestWriter(t, dir, 1<<20)
	old := w.inc.load()
	path := filepath.Join(dir, incarnationFileName)
	b, _ := readFile(t, path)
	b[0] ^= 1
	writeFile(t, path, b)
	w2 := newTestWriter(t, dir, 1<<20)
	if got := w2.inc.load(); got == 0 || got == old {
		t.Fatalf("damaged incarnation file: got %d; want a fresh id", got)
	}
	if _, err := readIncarnation(path); err != nil {
		t.Fatalf("replacement not on disk: %v", err)
	}
}

func TestIncarnationRotate(t *testing.T) {
	dir := t.TempDir()
	c, err := openIncarnation(dir, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	a := c.load()
	b, err := c.rotate(a)
	if err != nil || b == a || b == 0 {
		t.Fatalf("rotate: %d, %v; want a new nonzero id", b, err)
	}
	if again, _ := c.rotate(a); again != b {
		t.Fatalf("a second rotate from the old id gave %d; want the current %d unchanged", again, b)
	}
	if onDisk, _ := readIncarnation(filepath.Join(dir, incarnationFileName)); onDisk != b {
		t.Fatalf("on disk %d; want %d", onDisk, b)
	}
}

// v1Header is a version 1 header as written before incarnations.
func v1Header(node string, seq uint64, created time.Time) []byte {
	b := append([]byte(segmentMagic), segmentVersion1)
	b = binary.BigEndian.AppendUint64(b, seq)
	b = binary.BigEndian.AppendUint64(b, uint64(created.UnixMilli()))
	b = appendString(b, node)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

func TestReadSegmentVersion1(t *testing.T) {
	seg := v1Header("node-a", 7, time.UnixMilli(1_780_000_000_000))
	events := threeEvents()
	for i := range events {
		seg = appendRecord(seg, AppendEvent(nil, &events[i]))
	}
	seg = appendFooter(seg, len(events))
	n := 0
	h, err := ReadSegment(seg, func(*Event) error { n++; return nil })
	if err != nil || n != 3 {
		t.Fatalf("version 1 segment: %d events, %v; want 3", n, err)
	}
	if h.Ref() != (SegmentRef{Node: "node-a", Inc: 0, Seq: 7}) || h.Version != segmentVersion1 {
		t.Fatalf("version 1 header: %+v; want node-a, incarnation 0, seq 7", h)
	}
	// Re-identifying a version 1 segment gives it a version 2 header and
	// keeps every record.
	path := filepath.Join(t.TempDir(), segmentName(7, sealedSuffix))
	writeFile(t, path, seg)
	if _, err := reidentify(path, seg, 99); err != nil {
		t.Fatal(err)
	}
	b, _ := readFile(t, path)
	n = 0
	h, err = ReadSegment(b, func(*Event) error { n++; return nil })
	if err != nil || n != 3 || h.Ref() != (SegmentRef{Node: "node-a", Inc: 99, Seq: 7}) || !h.Created.Equal(time.UnixMilli(1_780_000_000_000)) {
		t.Fatalf("re-identified: %+v, %d events, %v", h, n, err)
	}
}

func TestZeroIncarnationVersion2Refused(t *testing.T) {
	seg := appendFooter(appendSegmentHeader(nil, "node-a", 0, 1, time.UnixMilli(0)), 0)
	expectCorrupt(t, "version 2 with incarnation 0", seg)
}

// A node id or region the aggregator would refuse in every event is
// refused when the pipeline opens.
func TestOpenRefusesLongNodeOrRegion(t *testing.T) {
	long := string(make([]byte, MaxShortLen+1))
	for _, c := range []Config{{Dir: t.TempDir(), NodeID: long}, {Dir: t.TempDir(), NodeID: "n", Region: long}} {
		if p, err := Open(c); err == nil {
			p.Close(t.Context())
			t.Errorf("Open with a %d-byte node id or region succeeded; want an error", len(long))
		}
	}
}
