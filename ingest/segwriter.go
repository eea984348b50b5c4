package ingest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// File names in the segment folder.
const (
	openSuffix   = ".open" // the one segment being written
	sealedSuffix = ".seg"  // complete, fsynced, ready to ship
	badSuffix    = ".bad"  // failed verification; kept for an operator, never shipped
	seqFileName  = "next-seq"
	// seqReserve is how many sequence numbers one write of next-seq
	// reserves, so opening a segment rarely costs an extra fsync.
	seqReserve = 1024
	// writeBufBytes is how much encoded data the writer buffers before a
	// write(2) even when more events are waiting.
	writeBufBytes = 256 << 10
)

var errDiskCap = errors.New("unshipped data over the byte cap")

func segmentName(seq uint64, suffix string) string {
	return fmt.Sprintf("%016x%s", seq, suffix)
}

// parseSegmentName returns the sequence number in a segment file name.
func parseSegmentName(name, suffix string) (uint64, bool) {
	hex, ok := strings.CutSuffix(name, suffix)
	if !ok || len(hex) != 16 {
		return 0, false
	}
	seq, err := strconv.ParseUint(hex, 16, 64)
	return seq, err == nil
}

// segmentWriter appends framed events to the open segment and seals it by
// size and age. It is used by one goroutine only (the pipeline's writer).
type segmentWriter struct {
	dir      string
	nodeID   string
	maxBytes int64
	maxAge   time.Duration
	capBytes int64
	now      func() time.Time
	log      *slog.Logger

	nextSeq  uint64 // next sequence number to hand out
	reserved uint64 // next-seq on disk: every seq below it may have been used
	inc      *incarnation

	f       *os.File
	seq     uint64
	created time.Time
	size    int64 // bytes of the open segment, written or buffered
	records int
	// written and writtenRecords describe the prefix known to be in the
	// file, where a failed write is cut back to.
	written        int64
	writtenRecords int
	buf            []byte // framed records not yet written to f
	dirty          bool   // written to f but not fsynced
	scratch        []byte

	pending *atomic.Int64 // bytes on disk not yet acknowledged by the aggregator
	// sealing holds the created time of the oldest segment handed to the
	// syncer and not yet renamed (0 if none), so the oldest-pending gauge
	// does not read 0 during its fsync.
	sealing *atomic.Int64
	// onSeal tells the shipper a segment is ready; whole means this
	// process wrote it from header to footer (not cut after a write error).
	onSeal func(seq uint64, n int, whole bool, created time.Time)
	// syncer, when set, does every fsync and seal off this goroutine (see
	// syncer.go); without one (tests) they happen inline.
	syncer *segmentSyncer
	hdrLen int64 // see headerLen
}

// append encodes ev into the open segment, opening or rotating segments as
// needed. It returns errDiskCap, without writing, when the event would take
// unshipped data past the byte cap.
func (w *segmentWriter) append(ev *Event) error {
	w.scratch = AppendEvent(w.scratch[:0], ev)
	return w.appendScratch(true)
}

// appendTally writes a drop tally as a record of the open segment, with
// the same rotation as an event, and the same cap unless pastCap.
func (w *segmentWriter) appendTally(t *DropTally, pastCap bool) error {
	w.scratch = AppendDropTally(w.scratch[:0], t)
	return w.appendScratch(!pastCap)
}

// appendScratch frames the payload in w.scratch into the open segment.
func (w *segmentWriter) appendScratch(capped bool) error {
	frame := int64(recordOverhead + len(w.scratch))
	if w.f != nil && w.records > 0 && w.size+frame+footerLen > w.maxBytes {
		if err := w.seal(); err != nil {
			return err
		}
	}
	// The cap counts what the event will cost on disk: its frame, the
	// footer its segment will get, and the header of a segment it opens.
	need := frame + footerLen
	if w.f == nil {
		need += w.headerLen()
	}
	if capped && w.pending.Load()+need > w.capBytes {
		return errDiskCap
	}
	if w.f == nil {
		if err := w.openSegment(); err != nil {
			return err
		}
		if w.syncer != nil {
			w.syncer.open.Store(w.f)
		}
	}
	before := len(w.buf)
	w.buf = appendRecord(w.buf, w.scratch)
	n := int64(len(w.buf) - before)
	w.size += n
	w.records++
	w.pending.Add(n)
	if len(w.buf) >= writeBufBytes {
		return w.flush()
	}
	return nil
}

// headerLen is the size of this writer's segment headers (fixed: the node
// id and the format do not change while it runs).
func (w *segmentWriter) headerLen() int64 {
	if w.hdrLen == 0 {
		w.hdrLen = int64(len(appendSegmentHeader(nil, w.nodeID, w.inc.load(), 0, time.Time{})))
	}
	return w.hdrLen
}

// openSegment creates <seq>.open and buffers its header.
func (w *segmentWriter) openSegment() error {
	if w.nextSeq >= w.reserved {
		if err := w.reserveSeqs(w.nextSeq + seqReserve); err != nil {
			return err
		}
	}
	seq := w.nextSeq
	path := filepath.Join(w.dir, segmentName(seq, openSuffix))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("cannot create segment: %w", err)
	}
	w.nextSeq++
	w.f, w.seq, w.created, w.records = f, seq, w.now(), 0
	w.written, w.writtenRecords = 0, 0
	w.buf = appendSegmentHeader(w.buf[:0], w.nodeID, w.inc.load(), seq, w.created)
	w.size = int64(len(w.buf))
	w.pending.Add(w.size)
	return nil
}

// reserveSeqs durably records that sequence numbers below next may be in
// use, so a restart never hands one out twice (the aggregator would take
// the new segment for a duplicate and drop it).
func (w *segmentWriter) reserveSeqs(next uint64) error {
	var b [12]byte
	binary.BigEndian.PutUint64(b[:], next)
	binary.LittleEndian.PutUint32(b[8:], crc32.Checksum(b[:8], crcTable))
	if err := writeFileSync(filepath.Join(w.dir, seqFileName), b[:]); err != nil {
		return fmt.Errorf("cannot reserve segment sequence numbers: %w", err)
	}
	w.reserved = next
	return nil
}

// flush writes buffered records to the file (no fsync). On a write error
// it abandons the segment (see abandon) and returns a *writeError.
func (w *segmentWriter) flush() error {
	if len(w.buf) == 0 || w.f == nil {
		return nil
	}
	_, err := w.f.Write(w.buf)
	w.buf = w.buf[:0]
	w.dirty = true
	if err != nil {
		return &writeError{dropped: w.abandon(), err: fmt.Errorf("cannot write segment %d: %w", w.seq, err)}
	}
	w.written, w.writtenRecords = w.size, w.records
	if w.syncer != nil {
		w.syncer.dirty.Store(true)
	}
	return nil
}

// writeError is a failed write; dropped records were lost with it.
type writeError struct {
	dropped int
	err     error
}

func (e *writeError) Error() string { return e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

// sync makes everything appended so far durable: the group commit, inline
// (without a syncer, whose own ticker does it otherwise).
func (w *segmentWriter) sync() error {
	if err := w.flush(); err != nil {
		return err
	}
	if !w.dirty || w.f == nil {
		return nil
	}
	w.dirty = false
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("cannot sync segment %d: %w", w.seq, err)
	}
	return nil
}

// dueForAge reports whether the open segment has records and is older than
// the age bound.
func (w *segmentWriter) dueForAge() bool {
	return w.f != nil && w.records > 0 && w.now().Sub(w.created) >= w.maxAge
}

// seal fsyncs and closes the open segment and renames it to <seq>.seg. Only
// then may the shipper see it. With a syncer, the writer only writes the
// footer and hands the file over; the rest happens there, in order.
func (w *segmentWriter) seal() error {
	if w.f == nil {
		return nil
	}
	w.buf = appendFooter(w.buf, w.records)
	w.size += footerLen
	w.pending.Add(footerLen)
	if w.syncer != nil {
		if err := w.flush(); err != nil {
			return err // abandoned: the syncer cuts and seals what was written
		}
		f := w.f
		w.f = nil
		w.syncer.open.Store(nil)
		w.sealing.CompareAndSwap(0, w.created.UnixMilli())
		w.syncer.jobs <- syncJob{f: f, seq: w.seq, records: w.records, created: w.created}
		return nil
	}
	if err := w.sync(); err != nil {
		return err
	}
	seq, n := w.seq, w.records
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("cannot close segment %d: %w", seq, err)
	}
	w.f = nil
	from := filepath.Join(w.dir, segmentName(seq, openSuffix))
	if err := sealFile(from, w.dir, seq); err != nil {
		return err
	}
	if w.onSeal != nil {
		w.onSeal(seq, n, true, w.created)
	}
	return nil
}

// abandon gives up on the open segment after a write error (a full disk,
// say): it cuts the file back to the records known to be written, seals
// those, and returns how many buffered records were lost. The next event
// opens a fresh segment.
func (w *segmentWriter) abandon() int {
	dropped := w.records - w.writtenRecords
	w.dirty = false
	w.buf = w.buf[:0]
	w.pending.Add(-(w.size - w.written))
	path := filepath.Join(w.dir, segmentName(w.seq, openSuffix))
	f := w.f
	w.f = nil
	if w.syncer != nil {
		w.syncer.open.Store(nil)
		w.sealing.CompareAndSwap(0, w.created.UnixMilli())
		w.syncer.jobs <- syncJob{f: f, seq: w.seq, records: w.writtenRecords, created: w.created, abandoned: true, cut: w.written}
		return dropped
	}
	err := f.Truncate(w.written)
	if err == nil && w.writtenRecords > 0 {
		_, err = f.Write(appendFooter(nil, w.writtenRecords))
		if err == nil {
			err = f.Sync()
		}
	}
	_ = f.Close()
	switch {
	case err == nil && w.writtenRecords > 0:
		w.pending.Add(footerLen)
		if err := sealFile(path, w.dir, w.seq); err != nil {
			w.log.Error("cannot seal segment after write error", "seq", w.seq, "err", err)
		} else if w.onSeal != nil {
			w.onSeal(w.seq, w.writtenRecords, false, w.created)
		}
	default:
		// Leave it as <seq>.open: the next Open applies the torn-tail rule.
		w.log.Error("segment left open after write error", "seq", w.seq, "err", err)
	}
	return dropped
}

// close seals the open segment, or removes it when it holds no records.
func (w *segmentWriter) close() error {
	if w.f == nil {
		return nil
	}
	if w.records > 0 {
		return w.seal()
	}
	path := w.f.Name()
	if w.syncer != nil {
		w.syncer.open.Store(nil)
	}
	_ = w.f.Close()
	w.f = nil
	w.pending.Add(-w.size)
	w.buf = w.buf[:0]
	return os.Remove(path)
}

// sealFile renames <seq>.open to <seq>.seg and fsyncs the folder so the new
// name survives a crash.
func sealFile(from, dir string, seq uint64) error {
	to := filepath.Join(dir, segmentName(seq, sealedSuffix))
	if err := os.Rename(from, to); err != nil {
		return fmt.Errorf("cannot seal segment %d: %w", seq, err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("cannot open segment folder: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("cannot sync segment folder: %w", err)
	}
	return nil
}

// writeFileSync replaces path atomically and durably.
func writeFileSync(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// recoverDir prepares the segment folder after a start or a crash: every
// <seq>.open left behind is scanned, cut back to its last whole record (the
// torn tail) and sealed, or removed if nothing whole is left; temporary
// files are removed. It sets the next sequence number and the pending byte
// count.
func (w *segmentWriter) recoverDir() error {
	if err := os.MkdirAll(w.dir, 0o755); err != nil {
		return fmt.Errorf("cannot create segment folder: %w", err)
	}
	entries, err := os.ReadDir(w.dir)
	if err != nil {
		return fmt.Errorf("cannot list segment folder: %w", err)
	}
	var maxSeq uint64
	var seen bool
	var opens []uint64
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".tmp") {
			_ = os.Remove(filepath.Join(w.dir, name))
			continue
		}
		for _, suffix := range []string{sealedSuffix, openSuffix, badSuffix} {
			seq, ok := parseSegmentName(name, suffix)
			if !ok {
				continue
			}
			if !seen || seq > maxSeq {
				maxSeq, seen = seq, true
			}
			switch suffix {
			case openSuffix:
				opens = append(opens, seq)
			case sealedSuffix:
				if info, err := e.Info(); err == nil {
					w.pending.Add(info.Size())
				}
			}
		}
	}
	sort.Slice(opens, func(i, j int) bool { return opens[i] < opens[j] })
	for _, seq := range opens {
		if err := w.recoverOpen(seq); err != nil {
			return err
		}
	}
	reserved, err := readSeqFile(filepath.Join(w.dir, seqFileName))
	if err != nil {
		return err
	}
	w.nextSeq = max(reserved, 1)
	if seen && maxSeq+1 > w.nextSeq {
		w.nextSeq = maxSeq + 1
	}
	w.reserved = reserved
	w.inc, err = openIncarnation(w.dir, w.log)
	return err
}

// recoverOpen applies the torn-tail rule to one <seq>.open file.
func (w *segmentWriter) recoverOpen(seq uint64) error {
	path := filepath.Join(w.dir, segmentName(seq, openSuffix))
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("cannot read open segment %d: %w", seq, err)
	}
	h, good, records, sealed, damage := scanSegment(b)
	if good == 0 || records == 0 || h.Seq != seq || h.NodeID != w.nodeID {
		// The header itself is torn (a crash right after creation), no
		// record survived, or the file is not ours: nothing to ship.
		w.log.Warn("removing open segment with no whole records", "seq", seq, "bytes", len(b), "damage", damage)
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("cannot remove segment %d: %w", seq, err)
		}
		return nil
	}
	if good < len(b) || !sealed {
		if good < len(b) {
			w.log.Warn("truncating torn segment tail", "seq", seq, "kept_records", records,
				"cut_bytes", len(b)-good, "damage", damage)
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("cannot open segment %d: %w", seq, err)
		}
		err = f.Truncate(int64(good))
		if err == nil && !sealed {
			_, err = f.WriteAt(appendFooter(nil, records), int64(good))
			good += footerLen
		}
		if err == nil {
			err = f.Sync()
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("cannot repair segment %d: %w", seq, err)
		}
	}
	if err := sealFile(path, w.dir, seq); err != nil {
		return err
	}
	w.pending.Add(int64(good))
	return nil
}

func readSeqFile(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("cannot read %s: %w", seqFileName, err)
	}
	if len(b) != 12 || crc32.Checksum(b[:8], crcTable) != binary.LittleEndian.Uint32(b[8:]) {
		return 0, fmt.Errorf("cannot read %s: %w", seqFileName, ErrCorruptSegment)
	}
	return binary.BigEndian.Uint64(b), nil
}
