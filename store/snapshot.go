package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// snapshotMagic opens every snapshot stream. Version 2 added the checksum.
var snapshotMagic = []byte("WAYMARK-SNAP-2\n")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// View is a consistent point-in-time view of the whole store, taken while
// the FSM is paused and streamed afterwards without blocking applies. It
// opens its iterator when it is taken, so a snapshot being persisted while
// another one is installed streams exactly the state it was taken at
// whatever the restore does to the files.
type View struct {
	snap *pebble.Snapshot
	it   *pebble.Iterator
	err  error
}

// View takes a consistent view. The caller must Release it.
func (s *Store) View() *View {
	v := &View{snap: s.db.NewSnapshot()}
	v.it, v.err = v.snap.NewIter(nil)
	if v.err != nil {
		v.err = fmt.Errorf("cannot iterate snapshot: %w", storageErr(v.err))
	}
	return v
}

// Release frees the view.
func (v *View) Release() {
	if v.it != nil {
		v.it.Close()
	}
	v.snap.Close()
}

// WriteTo streams every key and value: magic, then (uvarint key length, key,
// uvarint value length, value) pairs, then a zero key length, the pair count
// as a uvarint and the CRC-32C (Castagnoli, big-endian) of everything before
// it. The checksum is ours, end to end: a snapshot sent to a follower is
// checked by the code that applies it, whatever carried it.
func (v *View) WriteTo(w io.Writer) (int64, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	cw := &countWriter{w: bw}
	if v.err != nil {
		return 0, v.err
	}
	it := v.it
	cw.Write(snapshotMagic)
	var pairs uint64
	var hdr []byte
	for valid := it.First(); valid && cw.err == nil; valid = it.Next() {
		hdr = binary.AppendUvarint(hdr[:0], uint64(len(it.Key())))
		cw.Write(hdr)
		cw.Write(it.Key())
		val, err := it.ValueAndErr()
		if err != nil {
			return cw.n, fmt.Errorf("cannot read snapshot value: %w", err)
		}
		hdr = binary.AppendUvarint(hdr[:0], uint64(len(val)))
		cw.Write(hdr)
		cw.Write(val)
		pairs++
	}
	if err := it.Error(); err != nil {
		return cw.n, fmt.Errorf("cannot iterate snapshot: %w", err)
	}
	cw.Write([]byte{0})
	cw.Write(binary.AppendUvarint(nil, pairs))
	cw.Write(binary.BigEndian.AppendUint32(nil, cw.sum))
	if cw.err != nil {
		return cw.n, fmt.Errorf("cannot write snapshot: %w", cw.err)
	}
	if err := bw.Flush(); err != nil {
		return cw.n, fmt.Errorf("cannot write snapshot: %w", err)
	}
	return cw.n, nil
}

// countWriter counts and checksums what passes through and keeps the first
// error, so WriteTo checks once at the end.
type countWriter struct {
	w   io.Writer
	n   int64
	sum uint32 // CRC-32C of everything written so far
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.sum = crc32.Update(c.sum, castagnoli, p[:n])
	c.err = err
	return n, err
}

// sumReader checksums every byte read through it.
type sumReader struct {
	r   *bufio.Reader
	sum uint32
	one [1]byte
}

func (s *sumReader) ReadByte() (byte, error) {
	c, err := s.r.ReadByte()
	if err == nil {
		s.one[0] = c
		s.sum = crc32.Update(s.sum, castagnoli, s.one[:])
	}
	return c, err
}

func (s *sumReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.sum = crc32.Update(s.sum, castagnoli, p[:n])
	return n, err
}

// Restore replaces the whole database with a stream written by
// View.WriteTo, atomically: readers see the old state until the new one is
// complete, and never an empty or half-filled store. The stream is written
// into sstables in a directory of its own beside the database, checked to
// the last byte (pair count, checksum, nothing after the trailer), and only
// then swapped in with one ingest: a single manifest edit. Each table
// carries a range deletion over its own span of the key space, and the
// tables' spans tile all of it, so the ingest shadows every old key at the
// same sequence number that makes the new ones visible. (Pebble's
// IngestAndExcise, the obvious tool, lets a concurrent Get miss a key that
// is on both sides of the swap in v2.1.7; TestRestoreKeepsServingReads
// caught it.) The shadowed data goes at the next compactions. A damaged
// stream, a crash or an I/O error before the edit leaves the old state
// serving and only a temporary directory behind, which the next Restore
// clears.
func (s *Store) Restore(r io.Reader) error {
	tmp := s.fs.PathJoin(s.dir, restoreDir)
	if err := s.fs.RemoveAll(tmp); err != nil {
		return fmt.Errorf("cannot restore snapshot: cannot clear %q: %w", tmp, storageErr(err))
	}
	if err := s.fs.MkdirAll(tmp, 0o755); err != nil {
		return fmt.Errorf("cannot restore snapshot: cannot create %q: %w", tmp, storageErr(err))
	}
	defer s.fs.RemoveAll(tmp)
	paths, err := s.writeRestoreTables(r, tmp)
	if err != nil {
		return fmt.Errorf("cannot restore snapshot: %w", err)
	}
	if err := s.db.Ingest(context.Background(), paths); err != nil {
		return fmt.Errorf("cannot restore snapshot: cannot swap it in: %w", storageErr(err))
	}
	if err := errors.Join(s.loadBlocklist(), s.loadDomains()); err != nil {
		return fmt.Errorf("cannot restore snapshot: %w", err)
	}
	return nil
}

// restoreDir holds a snapshot's sstables until they are ingested.
const restoreDir = "restore.tmp"

// restoreTableBytes bounds each sstable a restore writes.
var restoreTableBytes uint64 = 64 << 20 // a variable for the tests that rotate tables

// restoreTables writes a restore's sstables: each covers the key space
// from where the previous one ended (the first from the lowest key) to the
// first key of the next (the last to wipeEnd), and deletes that span.
type restoreTables struct {
	s      *Store
	dir    string
	paths  []string
	w      *sstable.Writer
	lo     []byte // start of the open table's span
	rotate bool   // the open table is full: end it at the next key
}

// add writes one pair, starting a table when none is open.
func (t *restoreTables) add(k, v []byte) error {
	if t.w != nil && t.rotate {
		if err := t.end(k); err != nil {
			return err
		}
	}
	if t.w == nil {
		if err := t.open(); err != nil {
			return err
		}
	}
	if err := t.w.Set(k, v); err != nil {
		return storageErr(err)
	}
	t.rotate = t.w.Raw().EstimatedSize() >= restoreTableBytes
	return nil
}

func (t *restoreTables) open() error {
	path := t.s.fs.PathJoin(t.dir, fmt.Sprintf("%06d.sst", len(t.paths)))
	f, err := t.s.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return storageErr(err)
	}
	t.w = sstable.NewWriter(objstorageprovider.NewFileWritable(f), sstable.WriterOptions{
		TableFormat:  t.s.db.TableFormat(),
		FilterPolicy: bloom.FilterPolicy(10),
	})
	t.paths = append(t.paths, path)
	if t.lo == nil {
		t.lo = []byte{0}
	}
	return nil
}

// end deletes the open table's span up to hi, closes (and syncs) it, and
// starts the next span at hi.
func (t *restoreTables) end(hi []byte) error {
	err := t.w.DeleteRange(t.lo, hi)
	if cerr := t.w.Close(); err == nil {
		err = cerr
	}
	t.w = nil
	t.lo = hi
	if err != nil {
		return storageErr(err)
	}
	return nil
}

// finish ends the last table at wipeEnd; with no pairs at all, one table
// holds the deletion alone, so the restore still empties the store.
func (t *restoreTables) finish() error {
	if t.w == nil {
		if err := t.open(); err != nil {
			return err
		}
	}
	return t.end(wipeEnd)
}

// close releases a table left open by a failed restore.
func (t *restoreTables) close() {
	if t.w != nil {
		t.w.Close()
	}
}

// writeRestoreTables checks and writes the stream into sstables under dir
// and returns their paths, in key order.
func (s *Store) writeRestoreTables(r io.Reader, dir string) (paths []string, err error) {
	br := bufio.NewReaderSize(r, 1<<20)
	sr := &sumReader{r: br}
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(sr, magic); err != nil || string(magic) != string(snapshotMagic) {
		return nil, fmt.Errorf("%w: bad header", ErrCorrupt)
	}
	tables := &restoreTables{s: s, dir: dir}
	defer tables.close()
	var prev []byte
	var pairs uint64
	for {
		k, err := readChunk(sr)
		if err != nil {
			return nil, err
		}
		if len(k) == 0 {
			break
		}
		// WriteTo emits keys in strictly increasing order, all inside the
		// span the restore replaces; anything else is not a stream it wrote.
		if bytes.Compare(k, prev) <= 0 || bytes.Compare(k, wipeEnd) >= 0 {
			return nil, fmt.Errorf("%w: key %q out of order", ErrCorrupt, k)
		}
		prev = k
		v, err := readChunk(sr)
		if err != nil {
			return nil, err
		}
		pairs++
		if err := tables.add(k, v); err != nil {
			return nil, err
		}
	}
	want, err := binary.ReadUvarint(sr)
	if err != nil || want != pairs {
		return nil, fmt.Errorf("%w: pair count %d, trailer says %d", ErrCorrupt, pairs, want)
	}
	sum := sr.sum
	var trailer [4]byte
	if _, err := io.ReadFull(br, trailer[:]); err != nil || binary.BigEndian.Uint32(trailer[:]) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: data after the trailer", ErrCorrupt)
	}
	if err := tables.finish(); err != nil {
		return nil, err
	}
	return tables.paths, nil
}

// wipeEnd bounds every key the store writes: each starts with a table letter.
var wipeEnd = []byte{0xff, 0xff}

const maxChunk = 64 << 20

func readChunk(r *sumReader) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if n > maxChunk {
		return nil, fmt.Errorf("%w: chunk of %d bytes", ErrCorrupt, n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return buf, nil
}
