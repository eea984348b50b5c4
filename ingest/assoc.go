package ingest

// setAssoc is a fixed-size cache from nonzero 64-bit keys to small values,
// set-associative with least-recently-used eviction in each set: a full
// cache replaces its coldest entries instead of forgetting everything, and
// its memory is fixed at creation. V must hold no pointers (indices into
// an internTable instead of strings), so the garbage collector never scans
// the cache. Used by one goroutine (the writer's enricher).
type setAssoc[V any] struct {
	sets  [][assocWays]assocSlot[V]
	mask  uint64
	clock uint32
}

// assocWays is the number of entries per set.
const assocWays = 8

type assocSlot[V any] struct {
	key  uint64 // 0: empty
	used uint32 // clock at the last hit
	val  V
}

func newSetAssoc[V any](sets int) setAssoc[V] {
	if sets&(sets-1) != 0 || sets <= 0 {
		panic("BUG: setAssoc sets must be a power of two")
	}
	return setAssoc[V]{sets: make([][assocWays]assocSlot[V], sets), mask: uint64(sets - 1)}
}

func (c *setAssoc[V]) get(key uint64) (V, bool) {
	set := &c.sets[key&c.mask]
	for i := range set {
		if s := &set[i]; s.key == key {
			c.clock++
			s.used = c.clock
			return s.val, true
		}
	}
	var zero V
	return zero, false
}

// put stores v for key in an empty way of its set, or in place of the
// least recently used one.
func (c *setAssoc[V]) put(key uint64, v V) {
	set := &c.sets[key&c.mask]
	victim := 0
	for i := range set {
		if set[i].key == 0 || set[i].key == key {
			victim = i
			break
		}
		if age(c.clock, set[i].used) > age(c.clock, set[victim].used) {
			victim = i
		}
	}
	c.clock++
	set[victim] = assocSlot[V]{key: key, used: c.clock, val: v}
}

// age is how long ago used was, correct across the clock wrapping.
func age(now, used uint32) uint32 { return now - used }

// len counts the cached entries (tests).
func (c *setAssoc[V]) len() int {
	n := 0
	for i := range c.sets {
		for _, s := range c.sets[i] {
			if s.key != 0 {
				n++
			}
		}
	}
	return n
}

// internTable gives each distinct string a small index, so a cache entry
// can name it without holding a pointer, and every event that carries it
// shares one copy. It holds at most max strings; once full it refuses new
// ones (the caller then does not cache) rather than grow without bound.
type internTable struct {
	strs  []string // index 0 is ""
	index map[string]uint32
	max   int
}

func newInternTable(max int) internTable {
	return internTable{strs: []string{""}, index: map[string]uint32{"": 0}, max: max}
}

// id returns the index of s, adding it if there is room.
func (t *internTable) id(s string) (uint32, bool) {
	if i, ok := t.index[s]; ok {
		return i, true
	}
	if len(t.strs) >= t.max {
		return 0, false
	}
	i := uint32(len(t.strs))
	t.strs = append(t.strs, s)
	t.index[s] = i
	return i, true
}

// idBytes is id for a string held in b; it allocates only to add one.
func (t *internTable) idBytes(b []byte) (uint32, bool) {
	if i, ok := t.index[string(b)]; ok { // no allocation: map lookup by bytes
		return i, true
	}
	return t.id(string(b))
}

func (t *internTable) str(i uint32) string { return t.strs[i] }
