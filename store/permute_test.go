package store

import (
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
)

// The published SipHash-2-4 vector for key 00..0f and the 8-byte message
// 00..07 (Aumasson and Bernstein, vectors_sip64[8]).
func TestSipHash24ReferenceVector(t *testing.T) {
	key := []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	k0, k1 := sipKey(key)
	if got, want := sipHash24(k0, k1, 0x0706050403020100), uint64(0x93f5f5799a932462); got != want {
		t.Fatalf("sipHash24 = %#x; want %#x", got, want)
	}
}

func TestNewPermuterRejectsBadKeys(t *testing.T) {
	for _, key := range [][]byte{nil, {}, make([]byte, KeySize-1), make([]byte, KeySize+1), make([]byte, 32), make([]byte, KeySize)} {
		if p, err := NewPermuter(key); err == nil {
			t.Errorf("NewPermuter(%d bytes %x) = %v, nil; want an error", len(key), key, p)
		}
	}
	oneBit := make([]byte, KeySize)
	oneBit[KeySize-1] = 1
	if _, err := NewPermuter(oneBit); err != nil {
		t.Errorf("NewPermuter(one bit set): %v; want nil", err)
	}
}

// Codes already handed out must keep meaning the same ID forever, so the
// mapping under a fixed key is pinned here. A change to the round function,
// the round count or the key schedule fails this test.
func TestPermuteIsStable(t *testing.T) {
	p := newPermuter(t, testKey)
	for _, tc := range []struct {
		id   uint64
		code string
	}{
		{0, golden0},
		{1, golden1},
		{IDSpace - 1, goldenLast},
	} {
		if got := string(p.AppendCodeFor(nil, tc.id)); got != tc.code {
			t.Errorf("AppendCodeFor(%d) = %q; want %q", tc.id, got, tc.code)
		}
	}
}

const (
	golden0    = "tSQIoNi"
	golden1    = "YGdiwYk"
	goldenLast = "KgorfLl"
)

func TestPermuteIsBijective(t *testing.T) {
	p := newPermuter(t, testKey)
	const consecutive = 2_000_000
	ids := make([]uint64, 0, consecutive+300_000)
	for id := range uint64(consecutive) {
		ids = append(ids, id)
	}
	for i := range uint64(100_000) {
		ids = append(ids, IDSpace-1-i) // the top of the space, next to the walk boundary
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200_000 {
		ids = append(ids, consecutive+100_000+rng.Uint64N(IDSpace-consecutive-200_000))
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)

	out := make([]uint64, len(ids))
	for i, id := range ids {
		v := p.Permute(id)
		if v >= IDSpace {
			t.Fatalf("Permute(%d) = %d; want < IDSpace %d", id, v, IDSpace)
		}
		if back := p.Unpermute(v); back != id {
			t.Fatalf("Unpermute(Permute(%d)) = %d", id, back)
		}
		out[i] = v
	}
	slices.Sort(out)
	for i := 1; i < len(out); i++ {
		if out[i] == out[i-1] {
			t.Fatalf("two of %d distinct IDs map to %d", len(ids), out[i])
		}
	}
}

// Unpermute must also be a bijection when driven from the code side.
func TestIDOfInvertsAppendCodeFor(t *testing.T) {
	p := newPermuter(t, testKey)
	rng := rand.New(rand.NewPCG(5, 6))
	for range 50_000 {
		id := rng.Uint64N(IDSpace)
		code := p.AppendCodeFor(nil, id)
		got, err := p.IDOf(code)
		if err != nil || got != id {
			t.Fatalf("IDOf(%q) = %d, %v; want %d", code, got, err, id)
		}
		v := rng.Uint64N(IDSpace)
		if got := p.Permute(p.Unpermute(v)); got != v {
			t.Fatalf("Permute(Unpermute(%d)) = %d", v, got)
		}
	}
	if _, err := p.IDOf([]byte("abc")); err == nil {
		t.Fatalf("IDOf(abc) = nil error; want ErrBadCode")
	}
}

func TestPermuteIsKeyed(t *testing.T) {
	base := newPermuter(t, testKey)
	const samples = 2000
	for bit := range KeySize * 8 {
		key := slices.Clone(testKey)
		key[bit/8] ^= 1 << (bit % 8)
		p := newPermuter(t, key)
		same := 0
		for id := range uint64(samples) {
			if p.Permute(id) == base.Permute(id) {
				same++
			}
		}
		// Two unrelated permutations agree on a point with chance 1/IDSpace.
		if same > samples/100 {
			t.Errorf("flipping key bit %d leaves %d of %d IDs unchanged; want almost none", bit, same, samples)
		}
	}
}

// mulAddMod returns (a*x + b) mod IDSpace without overflow.
func mulAddMod(a, x, b uint64) uint64 {
	hi, lo := bits.Mul64(a, x)
	r := bits.Rem64(hi, lo, IDSpace)
	return (r + b) % IDSpace
}

func TestPermuteIsNotAffine(t *testing.T) {
	p := newPermuter(t, testKey)
	rng := rand.New(rand.NewPCG(7, 8))
	const samples = 20_000

	// An affine map x -> a*x+b (mod IDSpace) has the constant step a.
	steps := make(map[uint64]bool, samples)
	for range samples {
		x := rng.Uint64N(IDSpace - 1)
		steps[(p.Permute(x+1)+IDSpace-p.Permute(x))%IDSpace] = true
	}
	if len(steps) < samples*99/100 {
		t.Errorf("Permute(x+1)-Permute(x) took %d distinct values over %d samples; want nearly all distinct", len(steps), samples)
	}

	// Fit a line through (0, P(0)) and (1, P(1)), check it on (2, P(2)) and
	// on random points: it must miss almost all of them.
	b := p.Permute(0)
	a := (p.Permute(1) + IDSpace - b) % IDSpace
	if mulAddMod(a, 2, b) == p.Permute(2) {
		t.Errorf("P(0), P(1), P(2) are collinear mod IDSpace")
	}
	hits := 0
	for range samples {
		x := rng.Uint64N(IDSpace)
		if mulAddMod(a, x, b) == p.Permute(x) {
			hits++
		}
	}
	if hits > samples/1000 {
		t.Errorf("line through P(0), P(1) predicts %d of %d random points; want almost none", hits, samples)
	}

	// Nor is it affine over GF(2): P(x^y)^P(x)^P(y)^P(0) would be 0.
	// x and y stay below 2^40 so x^y stays inside the space.
	p0 := p.Permute(0)
	zero := 0
	for range samples {
		x, y := rng.Uint64N(1<<40), rng.Uint64N(1<<40)
		if p.Permute(x^y)^p.Permute(x)^p.Permute(y)^p0 == 0 {
			zero++
		}
	}
	if zero > samples/1000 {
		t.Errorf("P(x^y)^P(x)^P(y)^P(0) was 0 for %d of %d samples; want almost none", zero, samples)
	}
}

// Codes of consecutive IDs must look like independent random codes: a
// random pair of codes differs in 7*61/62 ≈ 6.89 characters on average and
// shares its first character with chance 1/62.
func TestConsecutiveCodesLookRandom(t *testing.T) {
	p := newPermuter(t, testKey)
	const n = 200_000
	lo, _ := RegionRange(5)
	for _, start := range []uint64{0, lo, IDSpace - n - 1} {
		var differing, samePrefix1, samePrefix2 int
		var firstChar [62]int
		prev := p.AppendCodeFor(nil, start)
		cur := make([]byte, 0, CodeLen)
		for id := start + 1; id <= start+n; id++ {
			cur = p.AppendCodeFor(cur[:0], id)
			for i := range CodeLen {
				if cur[i] != prev[i] {
					differing++
				}
			}
			if cur[0] == prev[0] {
				samePrefix1++
				if cur[1] == prev[1] {
					samePrefix2++
				}
			}
			firstChar[base62Value[cur[0]]]++
			prev, cur = cur, prev
		}
		avg := float64(differing) / n
		want := 7 * 61.0 / 62
		if avg < want-0.02 || avg > want+0.02 {
			t.Errorf("start %d: consecutive codes differ in %.4f characters on average; want %.4f (random codes)", start, avg, want)
		}
		// Expected 1/62 ≈ 3226 of 200k; the standard deviation is about 56.
		if samePrefix1 < 2900 || samePrefix1 > 3550 {
			t.Errorf("start %d: %d of %d consecutive codes share their first character; want about %d", start, samePrefix1, n, n/62)
		}
		// Expected 1/3844 ≈ 52.
		if samePrefix2 > 100 {
			t.Errorf("start %d: %d of %d consecutive codes share two leading characters; want about %d", start, samePrefix2, n, n/3844)
		}
		// Chi-square of the first character, 61 degrees of freedom: 120 is
		// far past the 0.1 %% tail (about 100).
		var chi2 float64
		exp := float64(n) / 62
		for _, c := range firstChar {
			d := float64(c) - exp
			chi2 += d * d / exp
		}
		if chi2 > 120 {
			t.Errorf("start %d: first-character chi-square %.1f over 61 degrees of freedom; want < 120", start, chi2)
		}
	}
}

// Cycle walking re-applies the 42-bit Feistel network until the value lands
// below 62^7; with 62^7/2^42 ≈ 0.80 of the values inside, a walk takes
// 2^42/62^7 ≈ 1.249 passes on average.
func TestCycleWalkPasses(t *testing.T) {
	p := newPermuter(t, testKey)
	rng := rand.New(rand.NewPCG(9, 10))
	const n = 100_000
	passes, most := 0, 0
	for range n {
		x, k := p.forward(rng.Uint64N(IDSpace)), 1
		for x >= IDSpace {
			x, k = p.forward(x), k+1
		}
		passes += k
		most = max(most, k)
	}
	avg := float64(passes) / n
	want := float64(uint64(1)<<42) / float64(IDSpace)
	if avg < want-0.02 || avg > want+0.02 {
		t.Errorf("average cycle walk %.4f passes; want %.4f", avg, want)
	}
	t.Logf("average %.4f passes, longest %d over %d random IDs", avg, most, n)
}
