package store

import (
	"errors"
	"testing"
)

// ExpireIdempotency deletes the records created at or before the cutoff,
// oldest first and at most limit per call, and keeps a record that
// replaced an expired one under the same key.
func TestExpireIdempotency(t *testing.T) {
	s := newTestStore(t)
	put := func(index uint64, key string, createdAt int64) {
		apply(t, s, index, func(b *Batch) error {
			return b.PutIdempotency("o1", key, &Idempotency{Status: 201, CreatedAt: createdAt})
		})
	}
	put(1, "a", 100)
	put(2, "b", 200)
	put(3, "c", 300)
	put(4, "d", 301)
	put(5, "a", 250) // replaces the record of t=100 under the same key

	expire := func(index uint64, cutoff int64, limit int) int {
		var n int
		apply(t, s, index, func(b *Batch) (err error) { n, err = b.ExpireIdempotency(cutoff, limit); return err })
		return n
	}
	has := func(key string) bool {
		_, found, err := s.Idempotency("o1", key)
		if err != nil {
			t.Fatal(err)
		}
		return found
	}
	// Index entries at or before 200: a@100 (stale) and b@200.
	if n := expire(6, 200, 1); n != 1 || !has("a") || !has("b") {
		t.Fatalf("first expiry (limit 1): removed %d, a %v, b %v; want the stale entry of a only, a and b kept", n, has("a"), has("b"))
	}
	if due, _ := s.IdempotencyExpiring(200); !due {
		t.Fatalf("IdempotencyExpiring(200) after a limited pass: got false; want b still due")
	}
	if n := expire(7, 300, 10); n != 3 || has("a") || has("b") || has("c") || !has("d") {
		t.Fatalf("expiry at 300: removed %d, a %v b %v c %v d %v; want a, b, c gone and d kept", n, has("a"), has("b"), has("c"), has("d"))
	}
	if due, _ := s.IdempotencyExpiring(300); due {
		t.Fatalf("IdempotencyExpiring(300) after the pass: got true; want false")
	}
	if due, _ := s.IdempotencyExpiring(301); !due {
		t.Fatalf("IdempotencyExpiring(301): got false; want d due")
	}
}

// A region is claimed once and keeps its slot; a block needs a claim.
func TestClaimRegionAndAllocRegionBlock(t *testing.T) {
	s := newTestStore(t)
	apply(t, s, 1, func(b *Batch) error {
		if _, _, err := b.AllocRegionBlock("eu", 10); !errors.Is(err, ErrRegionUnclaimed) {
			t.Errorf("block in unclaimed eu: got %v; want ErrRegionUnclaimed", err)
		}
		if slot, claimed, err := b.ClaimRegion("us"); err != nil || !claimed || slot != 0 {
			t.Errorf("claim us: got %d %v %v; want slot 0, claimed", slot, claimed, err)
		}
		if slot, claimed, err := b.ClaimRegion("eu"); err != nil || !claimed || slot != 1 {
			t.Errorf("claim eu: got %d %v %v; want slot 1, claimed", slot, claimed, err)
		}
		if slot, claimed, err := b.ClaimRegion("us"); err != nil || claimed || slot != 0 {
			t.Errorf("claim us again: got %d %v %v; want slot 0, not claimed", slot, claimed, err)
		}
		blk, slot, err := b.AllocRegionBlock("eu", 10)
		if lo, _ := RegionRange(1); err != nil || slot != 1 || blk.Start != lo || blk.Len() != 10 {
			t.Errorf("block in eu: got %+v slot %d, %v; want the first 10 IDs of slot 1", blk, slot, err)
		}
		return nil
	})
	rs, err := s.Regions()
	if err != nil || len(rs) != 2 || rs[0] != (RegionInfo{Name: "eu", Slot: 1, Allocated: 10}) || rs[1] != (RegionInfo{Name: "us", Slot: 0}) {
		t.Errorf("regions: got %+v, %v; want eu slot 1 with 10 allocated, us slot 0", rs, err)
	}
	for _, bad := range []string{"", "eu west", "eu\x00", "tab\t", string(make([]byte, MaxRegionNameLen+1))} {
		if CheckRegionName(bad) == nil {
			t.Errorf("CheckRegionName(%q): got nil; want an error", bad)
		}
	}
	if err := CheckRegionName("eu-west-1"); err != nil {
		t.Errorf("CheckRegionName(eu-west-1): %v", err)
	}
}
