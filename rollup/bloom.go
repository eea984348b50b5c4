package rollup

// bloomSet remembers which visitors of one hash day have a stored state,
// with false positives (about 1 % at 10 bits per key) and no false
// negatives. It grows by adding filters of bloomKeys keys each, so its
// size follows the day's visitors: 1.25 MB per million.
type bloomSet struct {
	filters []*bloomFilter
}

const (
	bloomKeys   = 1 << 18
	bloomBits   = bloomKeys * 10
	bloomHashes = 7
)

type bloomFilter struct {
	bits [bloomBits / 64]uint64
	n    int
}

func bloomHash(k visitorKey) (uint64, uint64) {
	h1 := mix64(k.hash ^ uint64(k.site)<<32 ^ uint64(k.day))
	h2 := mix64(h1 ^ 0x9e3779b97f4a7c15)
	return h1, h2 | 1
}

func (s *bloomSet) add(k visitorKey) {
	if s.mayContain(k) {
		return
	}
	if len(s.filters) == 0 || s.filters[len(s.filters)-1].n >= bloomKeys {
		s.filters = append(s.filters, new(bloomFilter))
	}
	f := s.filters[len(s.filters)-1]
	h1, h2 := bloomHash(k)
	for i := range uint64(bloomHashes) {
		bit := (h1 + i*h2) % bloomBits
		f.bits[bit/64] |= 1 << (bit % 64)
	}
	f.n++
}

func (s *bloomSet) mayContain(k visitorKey) bool {
	h1, h2 := bloomHash(k)
	for _, f := range s.filters {
		hit := true
		for i := range uint64(bloomHashes) {
			bit := (h1 + i*h2) % bloomBits
			if f.bits[bit/64]&(1<<(bit%64)) == 0 {
				hit = false
				break
			}
		}
		if hit {
			return true
		}
	}
	return false
}
