package rollup

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestTouchHeapPopsOldestFirst(t *testing.T) {
	var h touchHeap
	r := rand.New(rand.NewPCG(1, 2))
	var want []int64
	for range 1000 {
		ms := r.Int64N(1 << 20)
		want = append(want, ms)
		h.push(touch{ms: ms})
	}
	slices.Sort(want)
	for i, w := range want {
		if got := h.pop().ms; got != w {
			t.Fatalf("pop %d = %d, want %d", i, got, w)
		}
	}
	if len(h) != 0 {
		t.Fatalf("heap has %d entries left", len(h))
	}
}

func TestTouchHeapRebuildKeepsLiveStatesOnly(t *testing.T) {
	active := map[visitorKey]*visitorState{
		{site: 1, hash: 1}: {lastMS: 30},
		{site: 1, hash: 2}: {lastMS: 10},
		{site: 1, hash: 3}: {lastMS: 20},
	}
	h := touchHeap{{ms: 5}, {ms: 1}, {ms: 99}}
	h.rebuild(active)
	var got []int64
	for len(h) > 0 {
		got = append(got, h.pop().ms)
	}
	if !slices.Equal(got, []int64{10, 20, 30}) {
		t.Fatalf("rebuilt heap pops %v, want [10 20 30]", got)
	}
}
