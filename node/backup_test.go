package node

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

// makeBackup builds a backup file around payload by hand, from the format
// comment in backup.go, not through backupWriter.
func makeBackup(version uint16, index uint64, created time.Time, payload []byte) []byte {
	var b []byte
	b = append(b, "WMBACKUP"...)
	b = binary.BigEndian.AppendUint16(b, version)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint64(b, index)
	b = binary.BigEndian.AppendUint64(b, uint64(created.UnixMilli()))
	b = append(b, payload...)
	b = binary.BigEndian.AppendUint64(b, uint64(len(payload)))
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}

func TestBackupWriterMatchesFormat(t *testing.T) {
	created := time.UnixMilli(1764600000123).UTC()
	payload := []byte("store stream bytes")
	var got bytes.Buffer
	bw, err := newBackupWriter(&got, backupHeader{Version: backupVersion, Index: 42, Created: created})
	if err != nil {
		t.Fatal(err)
	}
	bw.Write(payload[:5])
	bw.Write(payload[5:])
	if err := bw.Close(); err != nil {
		t.Fatal(err)
	}
	want := makeBackup(1, 42, created, payload)
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("backupWriter wrote\n%x\nwant\n%x", got.Bytes(), want)
	}
	h, off, n, err := checkBackup(bytes.NewReader(want), int64(len(want)))
	if err != nil {
		t.Fatal(err)
	}
	if h.Index != 42 || !h.Created.Equal(created) || off != 28 || n != int64(len(payload)) || !bytes.Equal(want[off:off+n], payload) {
		t.Errorf("checkBackup: header %+v, payload at %d len %d", h, off, n)
	}
}

func TestCheckBackupRefuses(t *testing.T) {
	good := makeBackup(1, 7, time.Now(), bytes.Repeat([]byte("x"), 100))
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 1
		return b
	}
	cases := map[string][]byte{
		"empty":                 nil,
		"foreign file":          []byte("SQLite format 3\x00" + string(make([]byte, 80))),
		"wrong magic":           flip(0),
		"newer version":         makeBackup(2, 7, time.Now(), []byte("x")),
		"flags set":             flip(11),
		"header bit flipped":    flip(15),
		"payload bit flipped":   flip(50),
		"size bit flipped":      flip(len(good) - 33),
		"checksum bit flipped":  flip(len(good) - 1),
		"truncated":             good[:len(good)-1],
		"truncated to header":   good[:28],
		"appended to":           append(bytes.Clone(good), 0),
		"two backups in a file": append(bytes.Clone(good), good...),
	}
	for name, b := range cases {
		if _, _, _, err := checkBackup(bytes.NewReader(b), int64(len(b))); !errors.Is(err, ErrBadBackup) {
			t.Errorf("%s: got %v; want ErrBadBackup", name, err)
		}
	}
	if _, _, _, err := checkBackup(bytes.NewReader(good), int64(len(good))); err != nil {
		t.Errorf("the good file: %v", err)
	}
}

// FuzzCheckBackup: any bytes are refused with ErrBadBackup or accepted
// only when header, size and checksum hold; the payload bounds stay inside
// the input.
func FuzzCheckBackup(f *testing.F) {
	f.Add(makeBackup(1, 7, time.UnixMilli(0), []byte("payload")))
	f.Add(makeBackup(1, 0, time.UnixMilli(1), nil))
	f.Add([]byte("WMBACKUP"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, off, n, err := checkBackup(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			if !errors.Is(err, ErrBadBackup) {
				t.Fatalf("error without ErrBadBackup: %v", err)
			}
			return
		}
		if off != backupHeaderLen || off+n+backupTrailerLen != int64(len(b)) || h.Version != backupVersion {
			t.Fatalf("accepted with payload at %d len %d of %d bytes, version %d", off, n, len(b), h.Version)
		}
		sum := sha256.Sum256(b[:len(b)-sha256.Size])
		if !bytes.Equal(sum[:], b[len(b)-sha256.Size:]) {
			t.Fatal("accepted a file whose checksum does not hold")
		}
	})
}
