package store

// MaxRegions is how many regions the ID space is split into. Each region
// owns one contiguous, disjoint slice of [0, IDSpace); a region's nodes
// allocate blocks only from their own slice, so regions can never collide.
const MaxRegions = 64

// RegionSpan is the number of IDs in each region's range.
const RegionSpan = IDSpace / MaxRegions

// RegionRange returns the half-open ID range [lo, hi) that region slot owns.
func RegionRange(slot int) (lo, hi uint64) {
	lo = uint64(slot) * RegionSpan
	return lo, lo + RegionSpan
}

// RegionOf returns the region slot an ID belongs to.
func RegionOf(id uint64) int {
	slot := id / RegionSpan
	if slot >= MaxRegions { // the remainder past the last full span is never allocated
		return MaxRegions - 1
	}
	return int(slot)
}

// Block is a half-open range of IDs [Start, End) handed to one node.
type Block struct {
	Start, End uint64
}

// Len is the number of IDs left in the block.
func (b Block) Len() uint64 { return b.End - b.Start }
