package clickhouse

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// The registers' estimate is the sketch's own, to the bit, from an empty
// set to one whose registers have no zero left (LogLog-Beta's two
// regimes), and a set with hashes added to its registers estimates as
// the same hashes inserted into the sketch.
func TestRegistersEstimateIsTheSketchs(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{0, 1, 129, 3_000, 16_384, 60_000, 250_000, 2_000_000} {
		sk := newLinkSketch(true)
		hashes := make([]uint64, n)
		for i := range hashes {
			hashes[i] = rng.Uint64()
			sk.InsertHash(mixHash(hashes[i]))
		}
		regs, err := denseRegisters(sk)
		if err != nil {
			t.Fatal(err)
		}
		want := sk.Estimate()
		if got := registersEstimate(regs); got != want {
			t.Errorf("%d hashes: registers estimate %d, the sketch's %d", n, got, want)
		}
		if n > 0 && want == 0 {
			t.Errorf("%d hashes estimated as none", n)
		}
		// Half the hashes in registers, the rest added as hashes.
		half := newLinkSketch(true)
		for _, h := range hashes[:n/2] {
			half.InsertHash(mixHash(h))
		}
		hregs, err := denseRegisters(half)
		if err != nil {
			t.Fatal(err)
		}
		s := &linkSet{regs: hregs, hashes: slices.Clone(hashes[n/2:])}
		if got := s.estimate(); got != want {
			t.Errorf("%d hashes, half as registers: estimate %d, the sketch's %d", n, got, want)
		}
		if n > linkDenseHashes {
			if got := (&linkSet{sk: sk, dense: true}).estimate(); got != want {
				t.Errorf("%d hashes in a dense sketch: estimate %d, the sketch's %d", n, got, want)
			}
		}
	}
}

func BenchmarkSetEstimate(b *testing.B) {
	rng := rand.New(rand.NewPCG(9, 10))
	sk := newLinkSketch(true)
	for range 100_000 {
		sk.InsertHash(rng.Uint64())
	}
	regs, err := denseRegisters(sk)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("registers", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			registersEstimate(regs)
		}
	})
	b.Run("sketch", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sk.Estimate()
		}
	})
}
