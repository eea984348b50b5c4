package ingest

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// incarnationFileName holds the segment folder's incarnation: a random,
// nonzero 64-bit id made together with the folder. Segment identities are
// (node id, incarnation, sequence), so a wiped folder, whose sequence
// numbers start again at 1, makes new identities rather than repeats of
// segments the aggregator already holds. Same layout as next-seq: the id
// as uint64 big endian and a CRC32C of it, little endian.
const incarnationFileName = "incarnation"

// incarnation is the folder's current incarnation. The writer reads it for
// every new segment; the shipper replaces it when the aggregator reports a
// conflict (a VM snapshot restore or clone brought back an old
// incarnation file together with an old next-seq).
type incarnation struct {
	dir string
	mu  sync.Mutex // serialises rotations
	cur atomic.Uint64
}

// openIncarnation reads dir's incarnation, or creates one (durably) when
// the file is missing. A damaged file is replaced by a fresh id: a new
// incarnation can never make two segments share an identity, since every
// segment keeps the one its header names.
func openIncarnation(dir string, log *slog.Logger) (*incarnation, error) {
	c := &incarnation{dir: dir}
	inc, err := readIncarnation(filepath.Join(dir, incarnationFileName))
	switch {
	case err == nil:
		c.cur.Store(inc)
		return c, nil
	case errors.Is(err, ErrCorruptSegment):
		log.Warn("segment folder incarnation file damaged; starting a new incarnation", "err", err)
	case !errors.Is(err, os.ErrNotExist):
		return nil, err
	}
	if err := c.replace(0); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *incarnation) load() uint64 { return c.cur.Load() }

// rotate replaces the incarnation with a fresh random one if it is still
// from, and returns the current one. The new id is on disk before any
// segment uses it.
func (c *incarnation) rotate(from uint64) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur.Load() != from {
		return c.cur.Load(), nil
	}
	if err := c.replace(from); err != nil {
		return from, err
	}
	return c.cur.Load(), nil
}

// replace writes a fresh id different from old and makes it current.
func (c *incarnation) replace(old uint64) error {
	inc := old
	for inc == 0 || inc == old {
		var b [8]byte
		_, _ = rand.Read(b[:])
		inc = binary.BigEndian.Uint64(b[:])
	}
	var b [12]byte
	binary.BigEndian.PutUint64(b[:], inc)
	binary.LittleEndian.PutUint32(b[8:], crc32.Checksum(b[:8], crcTable))
	if err := writeFileSync(filepath.Join(c.dir, incarnationFileName), b[:]); err != nil {
		return fmt.Errorf("cannot write segment folder incarnation: %w", err)
	}
	c.cur.Store(inc)
	return nil
}

func readIncarnation(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, err
		}
		return 0, fmt.Errorf("cannot read %s: %w", incarnationFileName, err)
	}
	if len(b) != 12 || crc32.Checksum(b[:8], crcTable) != binary.LittleEndian.Uint32(b[8:]) || binary.BigEndian.Uint64(b) == 0 {
		return 0, fmt.Errorf("cannot read %s: %w", incarnationFileName, ErrCorruptSegment)
	}
	return binary.BigEndian.Uint64(b), nil
}

// reidentify rewrites the sealed segment at path (whose bytes are data)
// under incarnation inc: a new header, the records and footer byte for
// byte, fsynced and renamed into place. It returns the new size.
func reidentify(path string, data []byte, inc uint64) (int64, error) {
	h, start, err := parseSegmentHeader(data)
	if err != nil {
		return 0, err
	}
	out := appendSegmentHeader(make([]byte, 0, len(data)+8), h.NodeID, inc, h.Seq, h.Created)
	out = append(out, data[start:]...)
	if err := writeFileSync(path, out); err != nil {
		return 0, fmt.Errorf("cannot rewrite segment %d under a new incarnation: %w", h.Seq, err)
	}
	return int64(len(out)), nil
}
