package harness

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestPipelineOrderStallAndErrors(t *testing.T) {
	// A slow producer: each item takes 20 ms; consuming is instant, so the
	// consumer stalls about 20 ms for every item after the first.
	i := 0
	produce := func() (int, bool) {
		if i == 5 {
			return 0, false
		}
		time.Sleep(20 * time.Millisecond)
		i++
		return i, true
	}
	var got []int
	elapsed, stall, n, err := pipeline(context.Background(), produce, func(v int) error {
		got = append(got, v)
		return nil
	})
	if err != nil || n != 5 || len(got) != 5 || got[0] != 1 || got[4] != 5 {
		t.Fatalf("got %v, n %d, err %v; want 1..5 in order", got, n, err)
	}
	if stall < 60*time.Millisecond || stall > elapsed {
		t.Errorf("stall %v of elapsed %v; want about 80ms, never more than elapsed", stall, elapsed)
	}

	// An error from consume stops the run and is returned.
	i = 0
	boom := errors.New("boom")
	_, _, n, err = pipeline(context.Background(), produce, func(v int) error {
		if v == 2 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || n != 1 {
		t.Errorf("got n %d, err %v; want 1 and boom", n, err)
	}
}
