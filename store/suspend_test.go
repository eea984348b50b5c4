package store

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestOwnerSuspension(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	ada := Owner{ID: "own_a", Name: "Ada", CreatedAt: 10}
	bob := Owner{ID: "own_b", Name: "Bob", CreatedAt: 11}
	apply(t, s, 1, func(b *Batch) error {
		if err := b.PutOwner(&ada, HashAPIKey([]byte("ka"))); err != nil {
			return err
		}
		return b.PutOwner(&bob, HashAPIKey([]byte("kb")))
	})
	if ids, err := s.SuspendedOwners(); err != nil || len(ids) != 0 {
		t.Fatalf("SuspendedOwners before = %v, %v; want none", ids, err)
	}

	apply(t, s, 2, func(b *Batch) error {
		o, err := b.SetOwnerSuspended("own_a", true, 5000, "phishing")
		if err != nil {
			return err
		}
		want := Owner{ID: "own_a", Name: "Ada", CreatedAt: 10, Suspended: true, SuspendedAt: 5000, SuspendReason: "phishing"}
		if o != want {
			t.Errorf("SetOwnerSuspended = %+v; want %+v", o, want)
		}
		if !b.Durable() {
			t.Error("a suspension batch is not synced")
		}
		// Suspending again keeps the first time and reason.
		o, err = b.SetOwnerSuspended("own_a", true, 9000, "again")
		if err != nil || o.SuspendedAt != 5000 || o.SuspendReason != "phishing" {
			t.Errorf("second suspension = %+v, %v; want the first kept", o, err)
		}
		return nil
	})
	// A restart reads the suspension back, the key still names the owner.
	closeStore(t, s)
	s = openStore(t, dir)
	if ids, err := s.SuspendedOwners(); err != nil || !reflect.DeepEqual(ids, []string{"own_a"}) {
		t.Fatalf("SuspendedOwners after reopen = %v, %v; want [own_a]", ids, err)
	}
	o, found, err := s.OwnerByKey(HashAPIKey([]byte("ka")))
	if err != nil || !found || !o.Suspended || o.SuspendReason != "phishing" {
		t.Fatalf("OwnerByKey = %+v, %v, %v; want the suspended owner", o, found, err)
	}

	apply(t, s, 3, func(b *Batch) error {
		o, err := b.SetOwnerSuspended("own_a", false, 7000, "")
		if err != nil || o != ada {
			t.Errorf("unsuspend = %+v, %v; want %+v", o, err, ada)
		}
		return nil
	})
	if ids, err := s.SuspendedOwners(); err != nil || len(ids) != 0 {
		t.Fatalf("SuspendedOwners after unsuspend = %v, %v; want none", ids, err)
	}
	// Unsuspended, the record is version 1 again: a node that knows
	// nothing of suspension reads it.
	var raw []byte
	if _, err := get(s.db, ownerKey("own_a"), func(v []byte) error { raw = append([]byte(nil), v...); return nil }); err != nil || raw[0] != ownerVersion1 {
		t.Fatalf("unsuspended record starts with %v (%v); want version 1", raw[:1], err)
	}

	b := s.NewBatch()
	defer b.Close()
	if _, err := b.SetOwnerSuspended("nobody", true, 1, "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("suspend unknown owner: %v; want ErrNotFound", err)
	}
	if _, err := b.SetOwnerSuspended("own_b", true, 1, strings.Repeat("x", MaxSuspendReason+1)); !errors.Is(err, ErrInvalidSuspension) {
		t.Errorf("suspend with a %d-byte reason: %v; want ErrInvalidSuspension", MaxSuspendReason+1, err)
	}
}

// A version 2 owner record must carry the suspension; one with other or
// no flags is not something this build wrote.
func TestDecodeOwnerVersion2Flags(t *testing.T) {
	good := AppendOwner(nil, &Owner{ID: "a", Suspended: true, SuspendedAt: 1, SuspendReason: "r"})
	flagAt := len(AppendOwner(nil, &Owner{ID: "a"}))
	for _, flags := range []byte{0, 2, 3, 0xff} {
		b := append([]byte(nil), good...)
		b[flagAt] = flags
		var o Owner
		if err := DecodeOwner(b, &o); !errors.Is(err, ErrCorrupt) {
			t.Errorf("flags %#x: %v; want ErrCorrupt", flags, err)
		}
	}
}
