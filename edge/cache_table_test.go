package edge

import (
	"math/rand/v2"
	"testing"
)

// TestPackedTableMatchesMap runs random puts, deletes and gets against a
// Go map, with enough churn to force rehashes and leave tombstones.
func TestPackedTableMatchesMap(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var tab packedTable
	ref := make(map[uint64]*entry)
	key := func() uint64 { return uint64(1)<<60 | uint64(r.IntN(5000)) }
	for i := range 200_000 {
		k := key()
		switch r.IntN(3) {
		case 0:
			e := &entry{}
			tab.put(k, e)
			ref[k] = e
		case 1:
			tab.delete(k)
			delete(ref, k)
		default:
			if got, want := tab.get(k), ref[k]; got != want {
				t.Fatalf("op %d: get(%#x): got %p; want %p", i, k, got, want)
			}
		}
		if tab.live != len(ref) {
			t.Fatalf("op %d: live: got %d; want %d", i, tab.live, len(ref))
		}
	}
	for k, want := range ref {
		if got := tab.get(k); got != want {
			t.Fatalf("get(%#x): got %p; want %p", k, got, want)
		}
	}
}

func TestPackCode(t *testing.T) {
	seen := make(map[uint64]string)
	for _, code := range []string{"a", "A", "a_", "a-", "_a", "abc1234", "ABC1234", "abc12340", "zzzzzzzzzz", "----------", "0"} {
		k, ok := packCode(code)
		if !ok {
			t.Fatalf("packCode(%q): not packed; want packed", code)
		}
		if other, dup := seen[k]; dup {
			t.Fatalf("packCode(%q) == packCode(%q)", code, other)
		}
		if k == 0 || k == tombstoneKey {
			t.Fatalf("packCode(%q) = %#x, a reserved key", code, k)
		}
		seen[k] = code
		if kb, _ := packCode([]byte(code)); kb != k {
			t.Fatalf("packCode differs for string and bytes of %q", code)
		}
	}
	for _, code := range []string{"", "abcdefghijk", "a.b", "ä"} {
		if _, ok := packCode(code); ok {
			t.Errorf("packCode(%q): packed; want not", code)
		}
	}
}
