package rollup

import (
	"math/bits"
	"slices"
)

// hashSet finds the distinct hashes of a cell's visitors at a checkpoint
// by open addressing, where sorting them cost a twentieth of the
// aggregator's CPU: a busy cell (a site's total in an hour) has thousands
// of visitors, and past maxListHashes they go into a sketch, in which
// their order does not matter. The hashes are mixed (mix64), so their
// top bits index the table directly.
type hashSet struct{ slots []uint64 }

// distinct moves the distinct values of hs to its front, in first-seen
// order, and returns them.
func (t *hashSet) distinct(hs []uint64) []uint64 {
	shift := 64 - bits.Len(uint(2*len(hs)-1))
	mask := 1<<(64-shift) - 1
	t.slots = grown(t.slots, mask+1)
	out := hs[:0]
	zero := false // 0 marks a free slot, so it is tracked apart
	for _, h := range hs {
		if h == 0 {
			if !zero {
				zero = true
				out = append(out, 0)
			}
			continue
		}
		for i := int(h >> shift); ; i = (i + 1) & mask {
			s := t.slots[i]
			if s == h {
				break
			}
			if s == 0 {
				t.slots[i] = h
				out = append(out, h)
				break
			}
		}
	}
	return out
}

// visitorSet returns the set of the hashes in hs (any order, repeats
// allowed) as compact would leave it, encoding alike: a sorted list of at
// most maxListHashes, or a sketch. hs is reordered and reused for the
// list. Only a set built dense (past denseBuildHashes) skips the sort.
func (t *hashSet) visitorSet(hs []uint64) visitorSet {
	if len(hs) <= 2*maxListHashes {
		slices.Sort(hs)
		hs = slices.Compact(hs)
	} else {
		hs = t.distinct(hs)
	}
	if len(hs) <= denseBuildHashes && !slices.IsSorted(hs) {
		// A list is sorted, and a sparse sketch's encoding depends on
		// the order of its inserts: sorted, it is the one compact makes.
		slices.Sort(hs)
	}
	s := visitorSet{hashes: hs}
	if len(hs) > maxListHashes {
		s.insertDistinct()
	}
	return s
}
