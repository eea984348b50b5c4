package edge

import (
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/VictoriaMetrics/metrics"
)

func TestCacheBounded(t *testing.T) {
	set := metrics.NewSet()
	c := newCache(2*cacheShards, set)
	for i := range 5000 {
		code := "code" + strconv.Itoa(i)
		c.add(c.generation([]byte(code)), &entry{code: code})
	}
	if n := c.len(); n > 2*cacheShards {
		t.Fatalf("entries: got %d; want at most %d", n, 2*cacheShards)
	}
	if got := counterValue(set, "waymark_edge_cache_evictions_total"); got < 5000-2*cacheShards {
		t.Fatalf("evictions: got %d; want at least %d", got, 5000-2*cacheShards)
	}
}

// codesInOneShard returns n codes that hash to the same shard.
func codesInOneShard(c *cache, n int) []string {
	var codes []string
	want := c.shardOfString("seed")
	for i := 0; len(codes) < n; i++ {
		code := fmt.Sprintf("k%d", i)
		if c.shardOfString(code) == want {
			codes = append(codes, code)
		}
	}
	return codes
}

func TestCacheClockKeepsReferencedEntries(t *testing.T) {
	c := newCache(4*cacheShards, metrics.NewSet())
	codes := codesInOneShard(c, 6)
	for _, code := range codes[:4] {
		c.add(c.generation([]byte(code)), &entry{code: code})
	}
	// codes[0] is read, so the hand passes over it and evicts codes[1].
	if c.get([]byte(codes[0])) == nil {
		t.Fatalf("get(%q): got nil; want the entry", codes[0])
	}
	c.add(c.generation([]byte(codes[4])), &entry{code: codes[4]})
	if c.get([]byte(codes[0])) == nil {
		t.Errorf("referenced entry %q was evicted", codes[0])
	}
	if c.get([]byte(codes[1])) != nil {
		t.Errorf("unreferenced entry %q survived; want it evicted", codes[1])
	}
	if c.get([]byte(codes[4])) == nil {
		t.Errorf("new entry %q missing", codes[4])
	}
}

func TestCacheInvalidateFencesInFlightLoad(t *testing.T) {
	c := newCache(1024, metrics.NewSet())
	code := "abc1234"
	// A miss reads the generation, then loads from the store...
	gen := c.generation([]byte(code))
	// ...while the FSM applies a change and invalidates the code...
	c.invalidate(code)
	// ...so the stale load must not land in the cache.
	c.add(gen, &entry{code: code, status: 302})
	if e := c.get([]byte(code)); e != nil {
		t.Fatalf("stale load was cached: %+v", e)
	}
	c.add(c.generation([]byte(code)), &entry{code: code, status: 404})
	if e := c.get([]byte(code)); e == nil || e.status != 404 {
		t.Fatalf("fresh load: got %+v; want the 404 entry", e)
	}
	c.invalidate(code)
	if e := c.get([]byte(code)); e != nil {
		t.Fatalf("after invalidate: got %+v; want nil", e)
	}
	if n := c.len(); n != 0 {
		t.Fatalf("entries: got %d; want 0", n)
	}
}

// While a change to a code commits, the store may already show it: a load
// that read the store during the commit, after the fence went up, must
// not be cached either (it may have read the old state).
func TestCacheChangeFencesLoadsDuringCommit(t *testing.T) {
	c := newCache(1024, metrics.NewSet())
	code := "abc1234"
	c.add(c.generation([]byte(code)), &entry{code: code, status: 302})
	c.beginChange(code)
	if e := c.get([]byte(code)); e != nil {
		t.Fatalf("during the commit the old entry is served: %+v", e)
	}
	// A load that starts after the fence went up, before the commit shows.
	c.add(c.generation([]byte(code)), &entry{code: code, status: 302})
	if e := c.get([]byte(code)); e != nil {
		t.Fatalf("a load during the commit was cached: %+v", e)
	}
	c.endChange(code)
	c.add(c.generation([]byte(code)), &entry{code: code, status: 410})
	if e := c.get([]byte(code)); e == nil || e.status != 410 {
		t.Fatalf("after the commit: got %+v; want the new entry cached", e)
	}
}

func TestCacheReplaceAndReuseFreedSlots(t *testing.T) {
	c := newCache(cacheShards, metrics.NewSet()) // one slot per shard
	codes := codesInOneShard(c, 2)
	c.add(c.generation([]byte(codes[0])), &entry{code: codes[0], status: 1})
	c.add(c.generation([]byte(codes[0])), &entry{code: codes[0], status: 2})
	if e := c.get([]byte(codes[0])); e == nil || e.status != 2 {
		t.Fatalf("replaced entry: got %+v; want status 2", e)
	}
	c.invalidate(codes[0])
	c.add(c.generation([]byte(codes[1])), &entry{code: codes[1]})
	if c.get([]byte(codes[1])) == nil || c.len() != 1 {
		t.Fatalf("freed slot not reused: len %d", c.len())
	}
}

// TestCacheConcurrent is for the race detector.
func TestCacheConcurrent(t *testing.T) {
	c := newCache(256, metrics.NewSet())
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				code := "c" + strconv.Itoa((i*7+g)%500)
				if c.get([]byte(code)) == nil {
					c.add(c.generation([]byte(code)), &entry{code: code})
				}
				if i%5 == g {
					c.invalidate(code)
				}
			}
		})
	}
	wg.Wait()
	if n := c.len(); n < 0 || n > 256 {
		t.Fatalf("entries: got %d; want 0..256", n)
	}
}

func TestCacheInvalidateAll(t *testing.T) {
	c := newCache(4*cacheShards, metrics.NewSet())
	gen := c.generation([]byte("late"))
	for i := range 100 {
		code := "c" + strconv.Itoa(i)
		c.add(c.generation([]byte(code)), &entry{code: code})
	}
	c.invalidateAll()
	if n := c.len(); n != 0 {
		t.Fatalf("entries: got %d; want 0", n)
	}
	c.add(gen, &entry{code: "late"}) // a load that began before the restore
	if c.get([]byte("late")) != nil {
		t.Fatal("load from before invalidateAll was cached")
	}
	for i := range 300 { // the shards work as before
		code := "d" + strconv.Itoa(i)
		c.add(c.generation([]byte(code)), &entry{code: code})
	}
	if n := c.len(); n <= 0 || n > 4*cacheShards {
		t.Fatalf("entries after refill: got %d; want 1..%d", n, 4*cacheShards)
	}
}
