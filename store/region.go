package store

import (
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/cockroachdb/pebble/v2"
)

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

// RegionInfo is one claimed region: its slot of the ID space and how many
// IDs of it have been handed out in blocks.
type RegionInfo struct {
	Name      string `json:"name"`
	Slot      int    `json:"slot"`
	Allocated uint64 `json:"allocated"`
}

// Regions lists every claimed region, by name, as far as this replica has
// applied.
func (s *Store) Regions() ([]RegionInfo, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tabRegion}, UpperBound: []byte{tabRegion + 1}})
	if err != nil {
		return nil, fmt.Errorf("cannot list regions: %w", err)
	}
	var out []RegionInfo
	for valid := it.First(); valid; valid = it.Next() {
		v := it.Value()
		if len(v) != 1 || int(v[0]) >= MaxRegions {
			it.Close()
			return nil, fmt.Errorf("cannot list regions: region %q: %w", it.Key()[1:], ErrCorrupt)
		}
		out = append(out, RegionInfo{Name: string(it.Key()[1:]), Slot: int(v[0])})
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("cannot list regions: %w", err)
	}
	for i := range out {
		if out[i].Allocated, err = s.RegionCounter(out[i].Slot); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// MaxRegionNameLen is the longest region name (every event carries it).
const MaxRegionNameLen = 64

// CheckRegionName refuses a name that is empty, longer than
// MaxRegionNameLen, not UTF-8, or holds control characters or spaces.
func CheckRegionName(name string) error {
	if name == "" || len(name) > MaxRegionNameLen || !utf8.ValidString(name) {
		return fmt.Errorf("region name %q must be 1 to %d bytes of UTF-8", name, MaxRegionNameLen)
	}
	for _, r := range name {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return fmt.Errorf("region name %q holds a space or control character", name)
		}
	}
	return nil
}
