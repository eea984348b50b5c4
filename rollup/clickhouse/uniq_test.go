package clickhouse

import (
	"fmt"
	"math"
	"testing"
)

// uniqBound is the relative error DESIGN.md states for visitors
// (uniqCombined) at the cardinalities an answer meets; the test
// measures it on distinct 64-bit hashes, as visitor hashes are.
const uniqBound = 0.015

func TestUniqCombinedWithinStatedBound(t *testing.T) {
	c := newClient(t, sharedServer(t))
	for _, n := range []int{10, 100, 1000, 10_000, 100_000, 1_000_000} {
		worst := 0.0
		for seed := range 5 {
			r, err := c.Query(testCtx(t), fmt.Sprintf("SELECT uniqCombined(sipHash64(number, %d)) FROM numbers(%d)", seed, n))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := rawValue(r.Data[0][0]).uint()
			worst = max(worst, math.Abs(float64(got)-float64(n))/float64(n))
		}
		t.Logf("n = %d: worst relative error of 5 = %.4f%%", n, 100*worst)
		if worst > uniqBound {
			t.Errorf("uniqCombined over %d distinct hashes is off by %.2f%%; the stated bound is %.1f%%", n, 100*worst, 100*uniqBound)
		}
	}
}
