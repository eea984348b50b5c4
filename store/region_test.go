package store

import (
	"errors"
	"fmt"
	"testing"
)

func TestRegionRangesPartitionTheSpace(t *testing.T) {
	if MaxRegions < 16 {
		t.Fatalf("MaxRegions = %d; want at least 16", MaxRegions)
	}
	if MaxRegions*RegionSpan != IDSpace {
		t.Fatalf("MaxRegions*RegionSpan = %d; want IDSpace %d", MaxRegions*RegionSpan, IDSpace)
	}
	var prevHi uint64
	for slot := range MaxRegions {
		lo, hi := RegionRange(slot)
		if lo != prevHi {
			t.Fatalf("RegionRange(%d) starts at %d; want %d (end of the previous range)", slot, lo, prevHi)
		}
		if hi-lo != RegionSpan {
			t.Fatalf("RegionRange(%d) holds %d IDs; want %d", slot, hi-lo, RegionSpan)
		}
		for _, id := range []uint64{lo, lo + 1, hi - 2, hi - 1} {
			if got := RegionOf(id); got != slot {
				t.Fatalf("RegionOf(%d) = %d; want %d", id, got, slot)
			}
		}
		prevHi = hi
	}
	if prevHi != IDSpace {
		t.Fatalf("ranges end at %d; want IDSpace %d", prevHi, IDSpace)
	}
}

func TestAllocBlockAdjacent(t *testing.T) {
	s := newTestStore(t)
	var blocks []Block
	for i := range 5 {
		apply(t, s, uint64(i+1), func(b *Batch) error {
			blk, slot, err := b.AllocBlock("eu", 1000)
			if err != nil {
				return err
			}
			if slot != 0 {
				return fmt.Errorf("first region got slot %d; want 0", slot)
			}
			blocks = append(blocks, blk)
			return nil
		})
	}
	lo, _ := RegionRange(0)
	if blocks[0].Start != lo {
		t.Fatalf("first block starts at %d; want %d", blocks[0].Start, lo)
	}
	for i, blk := range blocks {
		if blk.Len() != 1000 {
			t.Errorf("block %d = %+v holds %d IDs; want 1000", i, blk, blk.Len())
		}
		if i > 0 && blk.Start != blocks[i-1].End {
			t.Errorf("block %d = %+v; want it to start where block %d = %+v ends", i, blk, i-1, blocks[i-1])
		}
	}
}

func TestAllocBlockRegionsGetDistinctSlots(t *testing.T) {
	s := newTestStore(t)
	var eu, us Block
	var euSlot, usSlot int
	apply(t, s, 1, func(b *Batch) error {
		var err error
		if eu, euSlot, err = b.AllocBlock("eu", 500); err != nil {
			return err
		}
		us, usSlot, err = b.AllocBlock("us", 500)
		return err
	})
	if euSlot == usSlot {
		t.Fatalf("eu and us both got slot %d", euSlot)
	}
	if RegionOf(eu.Start) != euSlot || RegionOf(eu.End-1) != euSlot {
		t.Errorf("eu block %+v is not inside slot %d", eu, euSlot)
	}
	if RegionOf(us.Start) != usSlot || RegionOf(us.End-1) != usSlot {
		t.Errorf("us block %+v is not inside slot %d", us, usSlot)
	}
	for _, r := range []struct {
		name string
		want int
	}{{"eu", euSlot}, {"us", usSlot}} {
		slot, found, err := s.RegionSlot(r.name)
		if err != nil || !found || slot != r.want {
			t.Errorf("RegionSlot(%q) = %d, %v, %v; want %d, true, nil", r.name, slot, found, err, r.want)
		}
	}
	if _, found, err := s.RegionSlot("ap"); err != nil || found {
		t.Errorf("RegionSlot(ap) found = %v, err = %v; want false, nil", found, err)
	}
}

func TestAllocBlockSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	var first Block
	apply(t, s, 7, func(b *Batch) (err error) {
		first, _, err = b.AllocBlock("us", 4096)
		return err
	})
	closeStore(t, s)

	s = openStore(t, dir)
	if idx, err := s.AppliedIndex(); err != nil || idx != 7 {
		t.Fatalf("AppliedIndex after reopen = %d, %v; want 7, nil", idx, err)
	}
	var second Block
	apply(t, s, 8, func(b *Batch) (err error) {
		second, _, err = b.AllocBlock("us", 4096)
		return err
	})
	if second.Start != first.End {
		t.Fatalf("block after reopen = %+v; want it to start at %d", second, first.End)
	}
}

func TestAllocBlockExhaustsRegion(t *testing.T) {
	s := newTestStore(t)
	lo, hi := RegionRange(0)
	var blk Block
	apply(t, s, 1, func(b *Batch) (err error) {
		blk, _, err = b.AllocBlock("eu", RegionSpan-10)
		return err
	})
	if blk.Start != lo || blk.End != hi-10 {
		t.Fatalf("big block = %+v; want [%d, %d)", blk, lo, hi-10)
	}
	// The last block is cut short at the end of the range.
	apply(t, s, 2, func(b *Batch) (err error) {
		blk, _, err = b.AllocBlock("eu", 100)
		return err
	})
	if blk.Start != hi-10 || blk.End != hi {
		t.Fatalf("last block = %+v; want [%d, %d)", blk, hi-10, hi)
	}
	b := s.NewBatch()
	defer b.Close()
	if blk, _, err := b.AllocBlock("eu", 1); !errors.Is(err, ErrRangeExhausted) {
		t.Fatalf("AllocBlock on a spent region = %+v, %v; want ErrRangeExhausted", blk, err)
	}
	// Other regions are unaffected.
	if blk, _, err := b.AllocBlock("us", 1); err != nil || RegionOf(blk.Start) != 1 {
		t.Fatalf("AllocBlock(us) = %+v, %v; want a block in slot 1", blk, err)
	}
}

// A size so large that next+size wraps around uint64 must still stop at the
// end of the range rather than move the counter backwards.
func TestAllocBlockHugeSizeDoesNotWrap(t *testing.T) {
	s := newTestStore(t)
	var first, second Block
	apply(t, s, 1, func(b *Batch) (err error) {
		first, _, err = b.AllocBlock("eu", 10)
		return err
	})
	apply(t, s, 2, func(b *Batch) (err error) {
		second, _, err = b.AllocBlock("eu", ^uint64(0))
		return err
	})
	_, hi := RegionRange(0)
	if second.Start != first.End || second.End != hi {
		t.Fatalf("block of size MaxUint64 = %+v; want [%d, %d)", second, first.End, hi)
	}
	b := s.NewBatch()
	defer b.Close()
	if _, _, err := b.AllocBlock("eu", 1); !errors.Is(err, ErrRangeExhausted) {
		t.Fatalf("AllocBlock after the huge block: %v; want ErrRangeExhausted", err)
	}
}

func TestAllocBlockRegionSpaceFull(t *testing.T) {
	s := newTestStore(t)
	seen := make(map[int]string)
	apply(t, s, 1, func(b *Batch) error {
		for i := range MaxRegions {
			name := fmt.Sprintf("region-%02d", i)
			_, slot, err := b.AllocBlock(name, 1)
			if err != nil {
				return err
			}
			if other, dup := seen[slot]; dup {
				return fmt.Errorf("%s and %s share slot %d", name, other, slot)
			}
			seen[slot] = name
		}
		return nil
	})
	b := s.NewBatch()
	defer b.Close()
	if _, _, err := b.AllocBlock("one-too-many", 1); !errors.Is(err, ErrRegionSpaceFull) {
		t.Fatalf("AllocBlock for region %d: %v; want ErrRegionSpaceFull", MaxRegions+1, err)
	}
	// Known regions keep allocating.
	if _, slot, err := b.AllocBlock("region-03", 1); err != nil || seen[slot] != "region-03" {
		t.Fatalf("AllocBlock(region-03) = slot %d, %v; want its own slot", slot, err)
	}
}
