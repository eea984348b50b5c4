package clickhouse

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestLinkSetsWithinStatedBound: the union of per-hour visitor sets of
// hand-known distinct hashes (small integers, as the world's clicks
// carry: the sketch mixes them first) (lists and sketches, as link rows hold
// them) estimates within 3 standard errors (2.43 %) of the count, and
// exactly up to 128.
func TestLinkSetsWithinStatedBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{5, 128, 129, 1_000, 20_000, 300_000} {
		for _, hours := range []int{1, 24, 720} {
			ids := make([][]uint64, hours)
			for v := range n { // every visitor in one to three hours
				for range 1 + rng.IntN(3) {
					h := rng.IntN(hours)
					ids[h] = append(ids[h], uint64(v+1))
				}
			}
			var u linkSet
			for _, hs := range ids {
				enc, err := linkSetOf(hs).appendTo(nil)
				if err != nil {
					t.Fatal(err)
				}
				set, err := decodeLinkSet(enc)
				if err != nil {
					t.Fatal(err)
				}
				if err := u.add(set); err != nil {
					t.Fatal(err)
				}
			}
			got := float64(u.estimate())
			bound := 0.0
			if n > linkListMax {
				bound = 3 * 1.04 / math.Sqrt(1<<linkPrecision)
			}
			if e := math.Abs(got-float64(n)) / float64(n); e > bound {
				t.Errorf("%d visitors over %d hours: estimate %.0f, error %.4f; want within %.4f", n, hours, got, e, bound)
			}
		}
	}
}
