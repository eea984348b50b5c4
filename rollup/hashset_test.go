package rollup

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestHashSetVisitorSetAsCompact checks that a checkpoint's set built by
// hashSet encodes exactly as compact builds it from the same hashes, on
// both sides of the list limit, past the dense build limit, with repeats
// and with the hash 0 (the free-slot mark).
func TestHashSetVisitorSetAsCompact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var hs hashSet
	for _, n := range []int{1, 2, 100, 128, 129, 256, 257, 300, 1000, 2048, 2049, 5000} {
		for _, distinct := range []int{n, n/2 + 1, 3} {
			pool := make([]uint64, distinct)
			for i := range pool {
				pool[i] = rng.Uint64()
			}
			pool[0] = 0
			in := make([]uint64, n)
			for i := range in {
				in[i] = pool[i%distinct]
			}
			rng.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
			want := visitorSet{hashes: slices.Clone(in)}
			want.compact()
			wantB, err := want.appendTo(nil)
			if err != nil {
				t.Fatal(err)
			}
			got := hs.visitorSet(slices.Clone(in))
			got.compact() // what appendSketchSet does first
			gotB, err := got.appendTo(nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(gotB, wantB) {
				t.Errorf("n=%d distinct=%d: encodings differ (%d bytes against %d)", n, distinct, len(gotB), len(wantB))
			}
			if g, w := got.estimate(), want.estimate(); g != w {
				t.Errorf("n=%d distinct=%d: estimate %d; want %d", n, distinct, g, w)
			}
		}
	}
}

func TestHashSetDistinct(t *testing.T) {
	var hs hashSet
	in := []uint64{5, 0, 5, 7, 0, 1 << 63, 7, 1<<63 | 5, 5}
	got := hs.distinct(slices.Clone(in))
	want := []uint64{5, 0, 7, 1 << 63, 1<<63 | 5}
	if !slices.Equal(got, want) {
		t.Fatalf("distinct(%v) = %v; want %v", in, got, want)
	}
}
