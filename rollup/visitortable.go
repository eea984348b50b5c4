package rollup

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/waymark/waymark/ingest"
)

// visitorTable holds the visit state of active visitors in memory, so a
// batch folds its events without reading the database. Every state a batch
// changes is written back in the same batch (the V rows), so a restart
// finds the same visits; the table is a cache of those rows that is never
// behind them. A visitor that is not in memory has a V row only if the
// bloom filter of its hash day says it may: only those are read, so a new
// visitor costs no read.
//
// A visitor leaves memory once all its visits have ended (idle past the
// visit gap, measured against the newest event time seen, so a backlog
// replayed after an outage does not close visits early) and been closed,
// or, past maxActive states, the least recently touched ones leave early
// (counted in visitors_evicted_total{reason="capacity"}).
type visitorTable struct {
	db        *pebble.DB
	active    map[visitorKey]*visitorState
	blooms    map[uint32]*bloomSet // per hash day: which visitors have a V row
	sites     siteTable
	strs      map[string]string // interned strings of states in memory
	touches   touchHeap         // states in memory, least recently touched first
	touched   []visitorKey      // states changed by the batch being applied
	maxActive int
	newestMS  int64 // the latest event time folded

	// cross maps a hash seen in a visit that began under another (it went
	// on past midnight UTC) to that visit's id, for the raw query engine:
	// stored events keep their own hash until scrubLinks rewrites them.
	crossMu sync.RWMutex
	cross   map[crossKey][]crossRun
}

type crossKey struct {
	site uint32
	hash uint64
}

type crossRun struct {
	from, to int64
	id       uint64
}

type touch struct {
	k  visitorKey
	ms int64
}

const (
	defaultMaxActiveVisitors = 4 << 20
	maxInternedStrings       = 1 << 20
	// closeSlack is how long past the visit gap a visit stays open: edges
	// ship seconds apart, and closing early would count an exit page that
	// a straggling pageview then moves.
	closeSlackMS = 5 * 60 * 1000
)

func newVisitorTable(db *pebble.DB, maxActive int) *visitorTable {
	if maxActive <= 0 {
		maxActive = defaultMaxActiveVisitors
	}
	return &visitorTable{
		db: db, active: make(map[visitorKey]*visitorState), blooms: make(map[uint32]*bloomSet),
		sites: newSiteTable(), strs: make(map[string]string), maxActive: maxActive,
		cross: make(map[crossKey][]crossRun),
	}
}

// siteTable numbers site ids for the life of the process. Queries look
// ids up concurrently with the writer adding them, hence the lock.
type siteTable struct {
	mu    sync.RWMutex
	ids   map[string]uint32
	names []string
}

func newSiteTable() siteTable { return siteTable{ids: make(map[string]uint32)} }

func (t *siteTable) id(s string) uint32 {
	if id, ok := t.lookup(s); ok {
		return id
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if id, ok := t.ids[s]; ok {
		return id
	}
	s = strings.Clone(s)
	id := uint32(len(t.names))
	t.ids[s] = id
	t.names = append(t.names, s)
	return id
}

func (t *siteTable) lookup(s string) (uint32, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	id, ok := t.ids[s]
	return id, ok
}

func (t *siteTable) name(id uint32) string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.names[id]
}

func (t *visitorTable) siteID(site string) uint32 { return t.sites.id(site) }

// crossed records that events of hash count under r's id (r began under
// another day's hash).
func (t *visitorTable) crossed(site uint32, hash uint64, r *run) {
	t.crossMu.Lock()
	defer t.crossMu.Unlock()
	k := crossKey{site, hash}
	runs := t.cross[k]
	for i := range runs {
		if runs[i].id == r.hash && runs[i].from <= r.start {
			runs[i].to = max(runs[i].to, r.alive+visitGapMS)
			return
		}
	}
	t.cross[k] = append(runs, crossRun{r.start, r.alive + visitGapMS, r.hash})
}

// visitID is the id a stored site event counts under: its visit's.
func (t *visitorTable) visitID(ev *ingest.Event) uint64 {
	if ev.SiteID == "" {
		return ev.VisitorHash
	}
	t.crossMu.RLock()
	defer t.crossMu.RUnlock()
	if len(t.cross) == 0 {
		return ev.VisitorHash
	}
	id, ok := t.sites.lookup(ev.SiteID)
	if !ok {
		return ev.VisitorHash
	}
	for _, r := range t.cross[crossKey{id, ev.VisitorHash}] {
		if ev.Time >= r.from && ev.Time <= r.to {
			return r.id
		}
	}
	return ev.VisitorHash
}

// forgetCross drops the mappings of visits that began before ms (their
// events have been rewritten with the visit id).
func (t *visitorTable) forgetCross(ms int64) {
	t.crossMu.Lock()
	defer t.crossMu.Unlock()
	for k, runs := range t.cross {
		kept := runs[:0]
		for _, r := range runs {
			if r.from >= ms {
				kept = append(kept, r)
			}
		}
		if len(kept) == 0 {
			delete(t.cross, k)
		} else {
			t.cross[k] = kept
		}
	}
}

func (t *visitorTable) intern(s string) string {
	if s == "" {
		return ""
	}
	if c, ok := t.strs[s]; ok {
		return c
	}
	if len(t.strs) >= maxInternedStrings {
		clear(t.strs) // states keep their copies; only sharing is lost
	}
	c := strings.Clone(s)
	t.strs[c] = c
	return c
}

func (t *visitorTable) internBytes(b []byte) string {
	if c, ok := t.strs[string(b)]; ok {
		return c
	}
	return t.intern(string(b))
}

// state returns the state of k: from memory, from its V row, or new.
func (t *visitorTable) state(k visitorKey) (*visitorState, error) {
	st := t.active[k]
	if st == nil {
		var err error
		if st, err = t.load(k); err != nil {
			return nil, err
		}
		t.active[k] = st
	}
	if !st.touched {
		st.touched = true
		t.touched = append(t.touched, k)
	}
	return st, nil
}

// load reads k's V row if its bloom filter says there may be one.
func (t *visitorTable) load(k visitorKey) (*visitorState, error) {
	st := new(visitorState)
	b := t.blooms[k.day]
	if b == nil || !b.mayContain(k) {
		return st, nil
	}
	key := appendVisitKey(nil, k.day, t.sites.name(k.site), k.hash)
	v, closer, err := t.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read visitor state: %w", err)
	}
	defer closer.Close()
	return t.decode(v)
}

func (t *visitorTable) decode(v []byte) (*visitorState, error) {
	runs, err := decodeVisitorState(v, t.internBytes)
	if err != nil {
		return nil, err
	}
	st := &visitorState{runs: runs, stored: true}
	for i := range runs {
		st.lastMS = max(st.lastMS, runs[i].alive)
	}
	return st, nil
}

// preload reads, in one sorted pass, the V rows of the keys that are not
// in memory and whose bloom filter says they may exist, so that fold finds
// them in memory. Keys of new visitors cost nothing here.
func (t *visitorTable) preload(keys []visitorKey) error {
	type keyed struct {
		k   visitorKey
		key []byte
	}
	var todo []keyed
	var buf []byte
	for _, k := range keys {
		if _, ok := t.active[k]; ok {
			continue
		}
		b := t.blooms[k.day]
		if b == nil || !b.mayContain(k) {
			continue
		}
		off := len(buf)
		buf = appendVisitKey(buf, k.day, t.sites.name(k.site), k.hash)
		todo = append(todo, keyed{k, buf[off:len(buf):len(buf)]})
	}
	if len(todo) == 0 {
		return nil
	}
	slices.SortFunc(todo, func(x, y keyed) int { return bytes.Compare(x.key, y.key) })
	it, err := t.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tabVisit}, UpperBound: []byte{tabVisit + 1}})
	if err != nil {
		return fmt.Errorf("cannot read visitor states: %w", err)
	}
	defer it.Close()
	for i, x := range todo {
		if i > 0 && bytes.Equal(x.key, todo[i-1].key) {
			continue
		}
		if !it.SeekGE(x.key) || !bytes.Equal(it.Key(), x.key) {
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("cannot read visitor state: %w", err)
		}
		st, err := t.decode(v)
		if err != nil {
			return err
		}
		t.active[x.k] = st
	}
	return it.Error()
}

// closeIdle closes, in f's delta, every visit of a touched-long-ago state
// that has been idle past the gap (and slack) before the newest event time
// folded so far, and marks the state for writing.
func (t *visitorTable) closeIdle(f *folder, nowMS int64) {
	cutoff := min(nowMS, t.newestMS) - visitGapMS - closeSlackMS
	for len(t.touches) > 0 && t.touches.peek().ms < cutoff {
		e := t.touches.pop()
		st := t.active[e.k]
		if st == nil || st.lastMS != e.ms {
			continue // gone, or touched again later (a newer entry exists)
		}
		closed := false
		ent := f.d.ent(kindSite, t.sites.name(e.k.site))
		for i := range st.runs {
			if r := &st.runs[i]; !r.closed && !r.isLink() && r.end < cutoff {
				f.closeRun(ent, r)
				closed = true
			}
		}
		if closed {
			st.dirty = true
			if !st.touched {
				st.touched = true
				t.touched = append(t.touched, e.k)
			}
		}
	}
	t.compactQueue()
}

// compactQueue rebuilds the touch heap once stale entries outnumber the
// live ones, so it stays proportional to the states in memory.
func (t *visitorTable) compactQueue() {
	if len(t.touches) > 4096 && len(t.touches) > 2*len(t.active) {
		t.touches.rebuild(t.active)
	}
}

// stage writes every changed state of the batch to b: visits that ended
// before pruneBefore are dropped (no event inside the late window can join
// them any more), and an empty state deletes its row.
func (t *visitorTable) stage(b *pebble.Batch, pruneBefore int64) error {
	var kb, vb []byte
	for _, k := range t.touched {
		st := t.active[k]
		if st == nil || !st.dirty {
			continue
		}
		kept := st.runs[:0]
		for _, r := range st.runs {
			if r.end >= pruneBefore {
				kept = append(kept, r)
			}
		}
		st.runs = kept
		kb = appendVisitKey(kb[:0], k.day, t.sites.name(k.site), k.hash)
		var err error
		switch {
		case len(kept) > 0:
			vb = appendVisitorState(vb[:0], kept)
			err = b.Set(kb, vb, nil)
		case st.stored:
			err = b.Delete(kb, nil)
		}
		if err != nil {
			return fmt.Errorf("cannot stage visitor state: %w", err)
		}
	}
	return nil
}

// committed ends a batch that was durably written: the touched states are
// now what their rows hold; states whose visits are all closed leave
// memory, and the table is trimmed to maxActive.
func (t *visitorTable) committed() {
	for _, k := range t.touched {
		st := t.active[k]
		if st == nil {
			continue
		}
		st.touched = false
		if st.dirty {
			st.dirty = false
			st.stored = len(st.runs) > 0
			if st.stored {
				t.bloom(k.day).add(k)
			}
		}
		if done(st) {
			delete(t.active, k)
			continue
		}
		t.touches.push(touch{k, st.lastMS})
	}
	t.touched = t.touched[:0]
	t.trim()
}

// done reports whether nothing of st needs memory: every visit closed.
func done(st *visitorState) bool {
	for i := range st.runs {
		if r := &st.runs[i]; !r.isLink() && !r.closed {
			return false
		}
	}
	return true
}

// trim drops the least recently touched states past maxActive; their rows
// hold them, and a later event reads them back.
func (t *visitorTable) trim() int {
	n := 0
	for len(t.active) > t.maxActive && len(t.touches) > 0 {
		e := t.touches.pop()
		if st := t.active[e.k]; st != nil && st.lastMS == e.ms {
			delete(t.active, e.k)
			n++
		}
	}
	t.compactQueue()
	return n
}

// failed undoes a batch that was not written: every state it touched is
// dropped from memory, so the next use reads the row as it still is.
func (t *visitorTable) failed() {
	for _, k := range t.touched {
		delete(t.active, k)
	}
	t.touched = t.touched[:0]
}

func (t *visitorTable) bloom(d uint32) *bloomSet {
	b := t.blooms[d]
	if b == nil {
		b = new(bloomSet)
		t.blooms[d] = b
	}
	return b
}

// dropDaysBefore forgets the bloom filters of hash days before d (their
// rows have been deleted by retention).
func (t *visitorTable) dropDaysBefore(d uint32) {
	for day := range t.blooms {
		if day < d {
			delete(t.blooms, day)
		}
	}
}

// load scans the V rows of hash days from d0 on at start-up: every row
// goes into its day's bloom filter, and states with a visit still open are
// loaded into memory, so that their visits are closed in time.
func (t *visitorTable) loadFrom(d0 uint32) (rows, open int, err error) {
	lo := appendVisitKey(nil, d0, "", 0)[:5]
	it, err := t.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: []byte{tabVisit + 1}})
	if err != nil {
		return 0, 0, fmt.Errorf("cannot read visitor states: %w", err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		d, site, hash, ok := parseVisitKey(it.Key())
		if !ok {
			return rows, open, fmt.Errorf("cannot read visitor states: bad key %x", it.Key())
		}
		k := visitorKey{t.sites.id(site), d, hash}
		t.bloom(d).add(k)
		rows++
		st, err := t.decode(it.Value())
		if err != nil {
			return rows, open, err
		}
		for i := range st.runs {
			if r := &st.runs[i]; !r.isLink() && r.hash != hash && r.hash != 0 {
				t.crossed(k.site, hash, r)
			}
		}
		if !done(st) {
			t.active[k] = st
			open++
		}
	}
	t.touches.rebuild(t.active)
	return rows, open, it.Error()
}

// freshStates is the state source of a rebuild: every visitor starts
// empty and lives in memory only. States are keyed by hash alone: stored
// events already carry their visit's visitor id across midnight (see
// storedEncoding), so a visit's events after midnight have the hash of
// the day before.
type freshStates struct {
	m     map[visitorKey]*visitorState
	sites siteTable
}

func newFreshStates() *freshStates {
	return &freshStates{m: make(map[visitorKey]*visitorState), sites: newSiteTable()}
}

func (s *freshStates) state(k visitorKey) (*visitorState, error) {
	k.day = 0
	st := s.m[k]
	if st == nil {
		st = new(visitorState)
		s.m[k] = st
	}
	return st, nil
}

func (s *freshStates) siteID(site string) uint32    { return s.sites.id(site) }
func (s *freshStates) crossed(uint32, uint64, *run) {}
func (s *freshStates) intern(v string) string       { return v }
