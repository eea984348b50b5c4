package store

import (
	"errors"
	"reflect"
	"testing"
)

func FuzzDecodeShare(f *testing.F) {
	var tok [ShareTokenLen]byte
	good := Share{Hash: HashShareToken(tok), Owner: "o1", Kind: ShareLink, Target: "example.org/abc", Name: "press", PasswordHash: (&PasswordHash{MemoryKiB: 19456, Time: 2, Threads: 1, Salt: []byte("0123456789abcdef"), Key: []byte("0123456789abcdef0123456789abcdef")}).String(), CreatedAt: 1700000000000}
	f.Add(AppendShare(nil, &good))
	f.Add([]byte{shareVersion, 1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Share
		if err := DecodeShare(b, &s); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v; want ErrCorrupt", err)
			}
			return
		}
		var again Share
		if err := DecodeShare(AppendShare(nil, &s), &again); err != nil || !reflect.DeepEqual(s, again) {
			t.Fatalf("round trip: %+v (%v); want %+v", again, err, s)
		}
	})
}
