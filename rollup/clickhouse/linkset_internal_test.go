package clickhouse

import (
	"math"
	"math/rand/v2"
	"slices"
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

// TestDenseLinkSetsMergeAsSketches: dense sets encoded as 'D' (registers
// two to a byte, the large ones listed) decode to their registers, and
// merging them by register gives the estimate the sketches' own merge
// gives, bit for bit; the encoding is about half the sketch's 16 KB.
func TestDenseLinkSetsMergeAsSketches(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	var viaRegs linkSet
	viaSketch := newLinkSketch(true)
	for day := range 30 {
		hs := make([]uint64, 3000+day*100)
		for i := range hs {
			hs[i] = rng.Uint64()
		}
		set := linkSetOf(hs)
		if err := viaSketch.Merge(set.sk); err != nil {
			t.Fatal(err)
		}
		enc, err := set.appendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		if enc[0] != linkSetDense || len(enc) > linkRegisters/2+64 {
			t.Fatalf("day %d: encoded %q.. in %d bytes; want 'D' in at most %d", day, enc[0], len(enc), linkRegisters/2+64)
		}
		dec, err := decodeLinkSet(enc)
		if err != nil {
			t.Fatal(err)
		}
		if dec.regs == nil || dec.sk != nil {
			t.Fatalf("day %d: decoded to a sketch; want registers only", day)
		}
		if err := viaRegs.add(dec); err != nil {
			t.Fatal(err)
		}
	}
	if viaRegs.regs == nil {
		t.Fatal("the union is not held as registers")
	}
	if got, want := viaRegs.estimate(), viaSketch.Estimate(); got != want {
		t.Errorf("merged by register: %d; the sketches' merge: %d", got, want)
	}
	// Eight at a time is the plain maximum, for every pair of values.
	var a, b []uint8
	for x := range maxRegister + 1 {
		for y := range maxRegister + 1 {
			a, b = append(a, uint8(x)), append(b, uint8(y))
		}
	}
	for len(a)%8 != 0 {
		a, b = append(a, 0), append(b, maxRegister)
	}
	m := slices.Clone(a)
	maxRegisters(m, b)
	for i := range m {
		if m[i] != max(a[i], b[i]) {
			t.Fatalf("maxRegisters(%d, %d) = %d", a[i], b[i], m[i])
		}
	}
	// Registers of 15 and more (up to 51 at precision 14) round-trip.
	regs := make([]uint8, linkRegisters)
	for i := range regs {
		regs[i] = uint8(rng.IntN(14))
	}
	regs[0], regs[1], regs[9], regs[linkRegisters-1] = 15, 51, 16, 40
	got, err := decodeDense(appendDense(nil, regs)[1:])
	if err != nil || !slices.Equal(got, regs) {
		t.Errorf("dense registers round trip: %v, equal %v", err, slices.Equal(got, regs))
	}
}
