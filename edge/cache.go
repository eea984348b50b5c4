package edge

import (
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
)

// cacheShards spreads lock contention; a power of two keeps the modulo cheap.
const (
	cacheShardBits = 6
	cacheShards    = 1 << cacheShardBits
)

// entryKind is what a code answers, decided when the entry is built.
type entryKind uint8

const (
	kindRedirect entryKind = iota
	kindNotFound
	kindGone
	kindLegal
	kindBlocked
	kindReview
)

// entry is the pre-built answer for one code. It is immutable once it is in
// the cache (only ref and slot change, ref atomically and slot under the
// shard lock), so a reader may keep the pointer after dropping the lock.
// The fields a cache hit reads come first, so a hit touches one cache line
// of the entry.
type entry struct {
	ref          atomic.Uint32 // CLOCK reference bit
	kind         entryKind
	public       bool   // redirects: permanent, so shared caches may keep it
	status       uint16 // HTTP status of the answer
	expiresAt    int64  // Unix ms; 0 means never
	location     []byte // redirects: the destination, byte for byte
	cacheControl []byte // redirects without expiry: the pre-built header value

	code   string
	owner  string // the link's owner, checked against the suspended owners
	maxAge int64  // redirects: seconds, before clamping to the expiry
	body   []byte // pages: the HTML
	slot   int32  // index in the shard's ring; guarded by the shard lock

	blockSeen atomic.Uint32 // blocklist verdict for location: generation<<1 | blocked (blocklist.go)
	// reviewUntil (Unix ms): a redirect whose destination was edited shows
	// body, the review interstitial, until then (bait and switch); 0: none.
	reviewUntil int64
	// gated: the link has a password or a preview (password.go,
	// preview.go); nil for every other link, which pays one nil check.
	gated *gatedEntry
	// forwardQuery: a redirect merges the visit's query into location
	// (query.go); read only when the visit has one.
	forwardQuery bool
	// rules: the link's redirect rules (rulematch.go); nil for a link
	// without, which then pays one nil check.
	rules *ruleSet
}

// Entries with their bytes in the same allocation, right behind the entry:
// a hit then reads neighbouring memory instead of two more scattered
// objects.
type (
	entryBytes64 struct {
		e entry
		b [64]byte
	}
	entryBytes128 struct {
		e entry
		b [128]byte
	}
	entryBytes256 struct {
		e entry
		b [256]byte
	}
	entryBytes512 struct {
		e entry
		b [512]byte
	}
)

// newEntryWithBytes returns a zero entry and n bytes for its location and
// header values, in one allocation when n is small.
func newEntryWithBytes(n int) (*entry, []byte) {
	switch {
	case n <= 64:
		x := new(entryBytes64)
		return &x.e, x.b[:n:n]
	case n <= 128:
		x := new(entryBytes128)
		return &x.e, x.b[:n:n]
	case n <= 256:
		x := new(entryBytes256)
		return &x.e, x.b[:n:n]
	case n <= 512:
		x := new(entryBytes512)
		return &x.e, x.b[:n:n]
	}
	return new(entry), make([]byte, n)
}

// cache is a bounded map from code to entry, sharded, with CLOCK eviction.
// Each shard has a generation that every invalidation bumps: a miss reads
// the generation before it reads Pebble and inserts only if it is
// unchanged, so a load that raced with an invalidation cannot put the stale
// answer back.
//
// Codes of up to packedCodeMax characters (every generated code, most
// aliases) are packed into a uint64 and kept in a packedTable, whose
// slots hold the key next to the pointer: on a cache larger than the CPU's
// caches a hit then costs one memory stall for the table and one for the
// entry, where a string-keyed Go map costs three or four. Longer codes use
// a string-keyed map.
type cache struct {
	seed   maphash.Seed
	shards [cacheShards]cacheShard

	entries     atomic.Int64
	evictions   *metrics.Counter
	invalidated *metrics.Counter
}

type cacheShard struct {
	mu     sync.RWMutex
	packed packedTable
	long   map[string]*entry
	ring   []*entry // CLOCK ring; nil slots are listed in free
	free   []int32
	hand   int
	limit  int
	gen    atomic.Uint64
	// changing counts codes of this shard whose change is being committed
	// (beginChange to endChange); while it is above 0 nothing is added.
	changing int32
	_        [28]byte // keep neighbouring shard locks off one cache line
}

func newCache(maxEntries int, set *metrics.Set) *cache {
	c := &cache{
		seed:        maphash.MakeSeed(),
		evictions:   set.GetOrCreateCounter("waymark_edge_cache_evictions_total"),
		invalidated: set.GetOrCreateCounter("waymark_edge_cache_invalidations_total"),
	}
	limit := max(1, (maxEntries+cacheShards-1)/cacheShards)
	for i := range c.shards {
		c.shards[i].long = make(map[string]*entry)
		c.shards[i].limit = limit
	}
	return c
}

// packedCodeMax is the longest code packCode accepts: 6 bits a character
// and 4 bits of length fit in 64 bits.
const packedCodeMax = 10

// codeDigit maps a code character to 1..64 (A-Z, a-z, 0-9, '_', '-'); 0
// marks any other byte.
var codeDigit = func() (t [256]uint8) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
	for i := range len(alphabet) {
		t[alphabet[i]] = uint8(i + 1)
	}
	return t
}()

// packCode returns code as an integer key, unique per code, or false when
// code is too long or holds a byte outside the code alphabet.
func packCode[T string | []byte](code T) (uint64, bool) {
	if len(code) == 0 || len(code) > packedCodeMax {
		return 0, false
	}
	k := uint64(len(code)) << 60
	for i := 0; i < len(code); i++ {
		d := codeDigit[code[i]]
		if d == 0 {
			return 0, false
		}
		k |= uint64(d-1) << (6 * i)
	}
	return k, true
}

// packedTable is an open-addressing hash table from packed code to entry,
// with linear probing. Key 0 marks a free slot (no packed code is 0) and
// tombstoneKey a deleted one (no packed code has all its top bits set).
// It is guarded by the shard lock; it is never more than 3/4 full, so a
// probe always ends.
type packedTable struct {
	slots []packedSlot // length a power of two, or nil
	used  int          // live and deleted slots
	live  int
}

type packedSlot struct {
	key uint64
	e   *entry
}

const tombstoneKey = ^uint64(0)

// home is k's first slot: bits of the Fibonacci hash below the ones that
// chose the shard.
func (t *packedTable) home(k uint64) int {
	h := (k * 0x9E3779B97F4A7C15) << cacheShardBits
	return int(h>>32) & (len(t.slots) - 1)
}

func (t *packedTable) get(k uint64) *entry {
	if t.slots == nil {
		return nil
	}
	mask := len(t.slots) - 1
	for i := t.home(k); ; i = (i + 1) & mask {
		switch t.slots[i].key {
		case k:
			return t.slots[i].e
		case 0:
			return nil
		}
	}
}

func (t *packedTable) put(k uint64, e *entry) {
	if (t.used+1)*4 > len(t.slots)*3 {
		t.rehash()
	}
	mask := len(t.slots) - 1
	free := -1
	for i := t.home(k); ; i = (i + 1) & mask {
		switch t.slots[i].key {
		case k:
			t.slots[i].e = e
			return
		case tombstoneKey:
			if free < 0 {
				free = i
			}
			continue
		case 0:
			if free < 0 {
				free = i
				t.used++
			}
			t.slots[free] = packedSlot{key: k, e: e}
			t.live++
			return
		}
	}
}

func (t *packedTable) delete(k uint64) {
	if t.slots == nil {
		return
	}
	mask := len(t.slots) - 1
	for i := t.home(k); ; i = (i + 1) & mask {
		switch t.slots[i].key {
		case k:
			t.slots[i] = packedSlot{key: tombstoneKey}
			t.live--
			return
		case 0:
			return
		}
	}
}

// rehash moves the live entries into a table twice their number (at
// least 16 slots), dropping tombstones.
func (t *packedTable) rehash() {
	n := 16
	for n < (t.live+1)*2 {
		n *= 2
	}
	old := t.slots
	*t = packedTable{slots: make([]packedSlot, n)}
	for _, s := range old {
		if s.key != 0 && s.key != tombstoneKey {
			t.put(s.key, s.e)
		}
	}
}

// packedShard spreads packed keys over the shards (Fibonacci hashing).
func (c *cache) packedShard(k uint64) *cacheShard {
	return &c.shards[(k*0x9E3779B97F4A7C15)>>(64-cacheShardBits)]
}

func (c *cache) shardOf(code []byte) *cacheShard {
	if k, ok := packCode(code); ok {
		return c.packedShard(k)
	}
	return &c.shards[maphash.Bytes(c.seed, code)%cacheShards]
}

func (c *cache) shardOfString(code string) *cacheShard {
	if k, ok := packCode(code); ok {
		return c.packedShard(k)
	}
	return &c.shards[maphash.String(c.seed, code)%cacheShards]
}

// get returns the entry for code, or nil. It does not allocate.
func (c *cache) get(code []byte) *entry {
	var e *entry
	if k, ok := packCode(code); ok {
		sh := c.packedShard(k)
		sh.mu.RLock()
		e = sh.packed.get(k)
		sh.mu.RUnlock()
	} else {
		sh := &c.shards[maphash.Bytes(c.seed, code)%cacheShards]
		sh.mu.RLock()
		e = sh.long[string(code)]
		sh.mu.RUnlock()
	}
	if e != nil && e.ref.Load() == 0 {
		e.ref.Store(1)
	}
	return e
}

// lookupLocked, storeLocked and deleteLocked address code's entry in the
// map it belongs to; the caller holds the shard lock.
func (sh *cacheShard) lookupLocked(code string) *entry {
	if k, ok := packCode(code); ok {
		return sh.packed.get(k)
	}
	return sh.long[code]
}

func (sh *cacheShard) storeLocked(e *entry) {
	if k, ok := packCode(e.code); ok {
		sh.packed.put(k, e)
	} else {
		sh.long[e.code] = e
	}
}

func (sh *cacheShard) deleteLocked(code string) {
	if k, ok := packCode(code); ok {
		sh.packed.delete(k)
	} else {
		delete(sh.long, code)
	}
}

// generation is read before loading code from the store; pass it to add.
func (c *cache) generation(code []byte) uint64 { return c.shardOf(code).gen.Load() }

// add inserts e unless the shard was invalidated since gen was read.
func (c *cache) add(gen uint64, e *entry) {
	sh := c.shardOfString(e.code)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.gen.Load() != gen || sh.changing > 0 {
		return
	}
	if old := sh.lookupLocked(e.code); old != nil {
		e.slot = old.slot
		sh.ring[e.slot] = e
		sh.storeLocked(e)
		return
	}
	var slot int32
	switch {
	case len(sh.free) > 0:
		slot = sh.free[len(sh.free)-1]
		sh.free = sh.free[:len(sh.free)-1]
	case len(sh.ring) < sh.limit:
		slot = int32(len(sh.ring))
		sh.ring = append(sh.ring, nil)
	default:
		slot = sh.evict()
		c.evictions.Inc()
		c.entries.Add(-1)
	}
	e.slot = slot
	sh.ring[slot] = e
	sh.storeLocked(e)
	c.entries.Add(1)
}

// evict frees one slot of a full ring: the first entry under the hand whose
// reference bit is clear, clearing bits as the hand passes.
func (sh *cacheShard) evict() int32 {
	for {
		if sh.hand >= len(sh.ring) {
			sh.hand = 0
		}
		v := sh.ring[sh.hand]
		if v.ref.Load() != 0 {
			v.ref.Store(0)
			sh.hand++
			continue
		}
		sh.deleteLocked(v.code)
		slot := int32(sh.hand)
		sh.hand++
		return slot
	}
}

// invalidate drops code's entry, positive or negative, and fences off any
// load of code that is in flight.
func (c *cache) invalidate(code string) {
	sh := c.shardOfString(code)
	sh.mu.Lock()
	sh.gen.Add(1)
	if e := sh.lookupLocked(code); e != nil {
		sh.deleteLocked(code)
		sh.ring[e.slot] = nil
		sh.free = append(sh.free, e.slot)
		c.entries.Add(-1)
	}
	sh.mu.Unlock()
	c.invalidated.Inc()
}

// beginChange drops code's entry and stops the shard taking new entries
// until endChange: the store is about to show code's new state, and a load
// that read the old one must not be cached and served after it.
func (c *cache) beginChange(code string) {
	sh := c.shardOfString(code)
	sh.mu.Lock()
	sh.changing++
	sh.mu.Unlock()
	c.invalidate(code)
}

// endChange drops code's entry once more and lets the shard fill again.
func (c *cache) endChange(code string) {
	c.invalidate(code)
	sh := c.shardOfString(code)
	sh.mu.Lock()
	sh.changing--
	sh.mu.Unlock()
}

// invalidateAll empties the cache and fences off every load in flight.
func (c *cache) invalidateAll() {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		sh.gen.Add(1)
		n := sh.packed.live + len(sh.long)
		sh.packed = packedTable{}
		clear(sh.long)
		sh.ring, sh.free, sh.hand = sh.ring[:0], sh.free[:0], 0
		sh.mu.Unlock()
		c.entries.Add(-int64(n))
	}
	c.invalidated.Inc()
}

// len is the number of cached entries.
func (c *cache) len() int64 { return c.entries.Load() }
