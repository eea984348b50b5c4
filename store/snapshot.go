package store

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/cockroachdb/pebble/v2"
)

// snapshotMagic opens every snapshot stream. Version 2 added the checksum.
var snapshotMagic = []byte("WAYMARK-SNAP-2\n")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// View is a consistent point-in-time view of the whole store, taken while
// the FSM is paused and streamed afterwards without blocking applies.
type View struct {
	snap *pebble.Snapshot
}

// View takes a consistent view. The caller must Release it.
func (s *Store) View() *View { return &View{snap: s.db.NewSnapshot()} }

// Release frees the view.
func (v *View) Release() { v.snap.Close() }

// WriteTo streams every key and value: magic, then (uvarint key length, key,
// uvarint value length, value) pairs, then a zero key length, the pair count
// as a uvarint and the CRC-32C (Castagnoli, big-endian) of everything before
// it. The checksum is ours, end to end: a snapshot sent to a follower is
// checked by the code that applies it, whatever carried it.
func (v *View) WriteTo(w io.Writer) (int64, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	cw := &countWriter{w: bw}
	it, err := v.snap.NewIter(nil)
	if err != nil {
		return 0, fmt.Errorf("cannot iterate snapshot: %w", err)
	}
	defer it.Close()
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
// View.WriteTo. The applied index is cleared first (with everything else,
// synced) and written last, in the final batch, only after the pair count
// and checksum match. A crash or a damaged stream part-way therefore leaves
// a store that reports index 0, which the node must restore again before
// trusting; a later good Restore wipes whatever the failed one left.
func (s *Store) Restore(r io.Reader) error {
	br := bufio.NewReaderSize(r, 1<<20)
	sr := &sumReader{r: br}
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(sr, magic); err != nil || string(magic) != string(snapshotMagic) {
		return fmt.Errorf("cannot restore snapshot: %w: bad header", ErrCorrupt)
	}
	if err := s.wipe(); err != nil {
		return err
	}
	b := s.db.NewBatch()
	defer func() { b.Close() }()
	var applied, prev []byte
	var pairs uint64
	for {
		k, err := readChunk(sr)
		if err != nil {
			return fmt.Errorf("cannot restore snapshot: %w", err)
		}
		if len(k) == 0 {
			break
		}
		// WriteTo emits keys in strictly increasing order, all inside the
		// range wipe clears; anything else is not a stream it wrote.
		if bytes.Compare(k, prev) <= 0 || bytes.Compare(k, wipeEnd) >= 0 {
			return fmt.Errorf("cannot restore snapshot: %w: key %q out of order", ErrCorrupt, k)
		}
		prev = k
		v, err := readChunk(sr)
		if err != nil {
			return fmt.Errorf("cannot restore snapshot: %w", err)
		}
		pairs++
		if string(k) == string(keyApplied) {
			applied = v
			continue
		}
		if err := b.Set(k, v, nil); err != nil {
			return fmt.Errorf("cannot restore snapshot: %w", err)
		}
		if b.Len() > 4<<20 {
			if err := b.Commit(pebble.NoSync); err != nil {
				return fmt.Errorf("cannot restore snapshot: %w", err)
			}
			b.Close()
			b = s.db.NewBatch()
		}
	}
	want, err := binary.ReadUvarint(sr)
	if err != nil || want != pairs {
		return fmt.Errorf("cannot restore snapshot: %w: pair count %d, trailer says %d", ErrCorrupt, pairs, want)
	}
	sum := sr.sum
	var trailer [4]byte
	if _, err := io.ReadFull(br, trailer[:]); err != nil || binary.BigEndian.Uint32(trailer[:]) != sum {
		return fmt.Errorf("cannot restore snapshot: %w: checksum mismatch", ErrCorrupt)
	}
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("cannot restore snapshot: %w: data after the trailer", ErrCorrupt)
	}
	if applied != nil {
		if err := b.Set(keyApplied, applied, nil); err != nil {
			return fmt.Errorf("cannot restore snapshot: %w", err)
		}
	}
	// Syncing this last commit makes every earlier unsynced one durable too:
	// they precede it in the same write-ahead log.
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("cannot restore snapshot: %w", err)
	}
	return nil
}

// wipeEnd bounds every key the store writes: each starts with a table letter.
var wipeEnd = []byte{0xff, 0xff}

// wipe deletes every key, the applied index included, and syncs.
func (s *Store) wipe() error {
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange([]byte{0}, wipeEnd, nil); err != nil {
		return fmt.Errorf("cannot clear store: %w", err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("cannot clear store: %w", err)
	}
	return nil
}

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
