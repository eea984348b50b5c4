package node

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"
)

// A backup file (`waymark snapshot save`) wraps the store's own snapshot
// stream (store.View.WriteTo, which has its own magic and CRC) so that a
// file can be recognised and checked whole before anything is restored:
//
//	magic    8 bytes   "WMBACKUP"
//	version  uint16    backupVersion
//	flags    uint16    0 (reserved)
//	index    uint64    the source store's applied index
//	created  int64     Unix milliseconds
//	payload            the store stream
//	size     uint64    payload bytes
//	sha256   32 bytes  of everything before it
//
// Integers are big-endian.

const (
	backupMagic      = "WMBACKUP"
	backupVersion    = 1
	backupHeaderLen  = 8 + 2 + 2 + 8 + 8
	backupTrailerLen = 8 + sha256.Size
)

// ErrBadBackup marks a file that is not a whole, undamaged backup this
// version can restore.
var ErrBadBackup = errors.New("not a valid waymark snapshot file")

// backupHeader is the fixed start of a backup file.
type backupHeader struct {
	Version uint16
	Index   uint64
	Created time.Time
}

func appendBackupHeader(b []byte, h backupHeader) []byte {
	b = append(b, backupMagic...)
	b = binary.BigEndian.AppendUint16(b, h.Version)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint64(b, h.Index)
	return binary.BigEndian.AppendUint64(b, uint64(h.Created.UnixMilli()))
}

// parseBackupHeader decodes and checks the first backupHeaderLen bytes.
func parseBackupHeader(b []byte) (backupHeader, error) {
	var h backupHeader
	if len(b) < backupHeaderLen {
		return h, fmt.Errorf("%w: %d bytes is too short for the header", ErrBadBackup, len(b))
	}
	if string(b[:8]) != backupMagic {
		return h, fmt.Errorf("%w: it does not start with %q (is it a waymark snapshot?)", ErrBadBackup, backupMagic)
	}
	h.Version = binary.BigEndian.Uint16(b[8:])
	if h.Version != backupVersion {
		return h, fmt.Errorf("%w: format version %d; this waymark reads version %d", ErrBadBackup, h.Version, backupVersion)
	}
	if flags := binary.BigEndian.Uint16(b[10:]); flags != 0 {
		return h, fmt.Errorf("%w: unknown flags %#x", ErrBadBackup, flags)
	}
	h.Index = binary.BigEndian.Uint64(b[12:])
	ms := int64(binary.BigEndian.Uint64(b[20:]))
	if ms < 0 {
		return h, fmt.Errorf("%w: bad creation time", ErrBadBackup)
	}
	h.Created = time.UnixMilli(ms).UTC()
	return h, nil
}

// backupWriter writes a backup: the header at creation, the payload
// through Write, the trailer at Close.
type backupWriter struct {
	w    io.Writer
	sum  hash.Hash
	size uint64
	err  error
}

func newBackupWriter(w io.Writer, h backupHeader) (*backupWriter, error) {
	bw := &backupWriter{w: w, sum: sha256.New()}
	if _, err := bw.raw(appendBackupHeader(nil, h)); err != nil {
		return nil, err
	}
	return bw, nil
}

func (bw *backupWriter) raw(p []byte) (int, error) {
	bw.sum.Write(p)
	return bw.w.Write(p)
}

func (bw *backupWriter) Write(p []byte) (int, error) {
	n, err := bw.raw(p)
	bw.size += uint64(n)
	return n, err
}

// Close writes the size and checksum.
func (bw *backupWriter) Close() error {
	size := binary.BigEndian.AppendUint64(nil, bw.size)
	bw.sum.Write(size)
	_, err := bw.w.Write(bw.sum.Sum(size))
	return err
}

// checkBackup reads a whole backup of total bytes from r, checking the
// header, the size and the checksum. It returns the header and the offset
// and length of the payload; r is read once, start to end.
func checkBackup(r io.Reader, total int64) (h backupHeader, payloadOff, payloadLen int64, err error) {
	if total < backupHeaderLen+backupTrailerLen {
		return h, 0, 0, fmt.Errorf("%w: %d bytes is too short (truncated?)", ErrBadBackup, total)
	}
	sum := sha256.New()
	head := make([]byte, backupHeaderLen)
	if _, err := io.ReadFull(r, head); err != nil {
		return h, 0, 0, fmt.Errorf("cannot read snapshot header: %w", err)
	}
	if h, err = parseBackupHeader(head); err != nil {
		return h, 0, 0, err
	}
	sum.Write(head)
	payloadLen = total - backupHeaderLen - backupTrailerLen
	if n, err := io.CopyN(sum, r, payloadLen); err != nil {
		return h, 0, 0, fmt.Errorf("%w: payload cut short after %d bytes: %w", ErrBadBackup, n, err)
	}
	trailer := make([]byte, backupTrailerLen)
	if _, err := io.ReadFull(r, trailer); err != nil {
		return h, 0, 0, fmt.Errorf("%w: trailer cut short: %w", ErrBadBackup, err)
	}
	if size := binary.BigEndian.Uint64(trailer); size != uint64(payloadLen) {
		return h, 0, 0, fmt.Errorf("%w: the trailer says %d payload bytes, the file holds %d (truncated or appended to?)", ErrBadBackup, size, payloadLen)
	}
	sum.Write(trailer[:8])
	if !bytes.Equal(sum.Sum(nil), trailer[8:]) {
		return h, 0, 0, fmt.Errorf("%w: SHA-256 checksum mismatch: the file is damaged", ErrBadBackup)
	}
	return h, backupHeaderLen, payloadLen, nil
}
