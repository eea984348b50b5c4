package store

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2"
)

var snapshotMagic = []byte("WAYMARK-SNAP-1\n")

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
// uvarint value length, value) pairs, then a zero key length and the pair
// count as a uvarint. The Raft snapshot store checksums the file.
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
	for valid := it.First(); valid; valid = it.Next() {
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
	if cw.err != nil {
		return cw.n, fmt.Errorf("cannot write snapshot: %w", cw.err)
	}
	return cw.n, bw.Flush()
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

// Restore replaces the whole database with a stream written by
// View.WriteTo. The applied index is cleared first and written last, so a
// crash in the middle leaves a store that reports index 0 and is restored
// again on the next start.
func (s *Store) Restore(r io.Reader) error {
	br := bufio.NewReaderSize(r, 1<<20)
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != string(snapshotMagic) {
		return fmt.Errorf("cannot restore snapshot: %w: bad header", ErrCorrupt)
	}
	wipe := s.db.NewBatch()
	if err := wipe.DeleteRange([]byte{0}, []byte{0xff, 0xff}, nil); err != nil {
		return fmt.Errorf("cannot clear store: %w", err)
	}
	if err := wipe.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("cannot clear store: %w", err)
	}
	var applied []byte
	var pairs uint64
	b := s.db.NewBatch()
	for {
		k, err := readChunk(br)
		if err != nil {
			b.Close()
			return fmt.Errorf("cannot restore snapshot: %w", err)
		}
		if len(k) == 0 {
			break
		}
		v, err := readChunk(br)
		if err != nil {
			b.Close()
			return fmt.Errorf("cannot restore snapshot: %w", err)
		}
		pairs++
		if string(k) == string(keyApplied) {
			applied = v
			continue
		}
		if err := b.Set(k, v, nil); err != nil {
			b.Close()
			return fmt.Errorf("cannot restore snapshot: %w", err)
		}
		if b.Len() > 4<<20 {
			if err := b.Commit(pebble.NoSync); err != nil {
				return fmt.Errorf("cannot restore snapshot: %w", err)
			}
			b = s.db.NewBatch()
		}
	}
	want, err := binary.ReadUvarint(br)
	if err != nil || want != pairs {
		b.Close()
		return fmt.Errorf("cannot restore snapshot: %w: pair count %d, trailer says %d", ErrCorrupt, pairs, want)
	}
	if applied != nil {
		if err := b.Set(keyApplied, applied, nil); err != nil {
			b.Close()
			return fmt.Errorf("cannot restore snapshot: %w", err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("cannot restore snapshot: %w", err)
	}
	return nil
}

const maxChunk = 64 << 20

func readChunk(r *bufio.Reader) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
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
