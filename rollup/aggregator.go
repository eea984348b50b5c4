package rollup

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
)

// Pebble sizing for the aggregator database.
const (
	blockCacheBytes = 64 << 20
	memTableBytes   = 128 << 20
	// memTableReserve is what memtables take out of the cache: Pebble
	// reserves every memtable's size in the block cache (the mutable one,
	// one being flushed, one kept for reuse). A cache no larger than that
	// caches nothing once the memtables have grown to full size. The
	// reservation is accounting, not extra memory.
	memTableReserve = 3 * memTableBytes
	// separateValuesFrom: values at least this large go to blob files. A
	// raw block is a segment's day (hundreds of KiB); rollup rows and
	// visitor states are mostly far smaller.
	separateValuesFrom = 16 << 10
)

// ErrOldFormat means the aggregator folder holds a database of an earlier
// layout, which this version does not read.
var ErrOldFormat = errors.New("aggregator database is of an earlier format")

// Aggregator is the receiving side of the aggregator role: it stores the
// events of shipped segments exactly once, by day, folds them into
// rollups and visits, and drops old days.
type Aggregator struct {
	cfg Config
	log *slog.Logger
	m   *receiverMetrics
	rm  *rollupMetrics

	db    *pebble.DB
	cache *pebble.Cache

	// life guards db against Close: every operation holds it for reading.
	life   sync.RWMutex
	closed bool

	// mu makes apply, retention and rebuild the only writer, one at a
	// time: the visitor table and the day mirror change only under it.
	// Reads do not take it.
	mu       sync.Mutex
	visitors *visitorTable
	// spareDelta is the last checkpoint's delta, emptied, for the next
	// one (apply holds mu).
	spareDelta *delta
	// pend is the aggregation folded since the last checkpoint;
	// pendingEvents mirrors its event count for readers without mu.
	pend          pending
	pendingEvents atomic.Int64
	// journalNext is the sequence number of the next journal entry.
	journalNext uint64
	blocks      blockBuilder // raw blocks of the batch's segments (apply holds mu)
	// the batches of apply and of the checkpoint, kept (mu)
	applyBatch, checkpointBatch keptBatch
	// scratch of apply, kept between batches (apply holds mu)
	storedScratch      []*ingest.Event
	preloadScratch     []visitorKey
	journalScratch     []byte
	tallyKey, tallyVal []byte          // scratch of stageTallies
	days               map[day]dayStat // mirror of the Y table
	// gens counts, per day, the batches that stored events of it, so a
	// rebuild computed outside the lock can tell whether it is stale.
	gens map[day]uint64
	// scrubbed is the last day scrubLinks ran for (0: not read yet).
	scrubbed uint32
	// sealed and sealedDay are the first month and day whose month and
	// day rows are not written yet (seal.go); queries read them, so they
	// are atomic.
	sealed, sealedDay atomic.Uint32
	diskCheck         time.Time // when diskBytes was last refreshed

	// sketches caches decoded visitor sets of finished buckets for
	// queries; apply drops what it changes.
	sketches *sketchCache

	// limits remembers, per link code, the click limit already reported
	// to OnClickLimit, so it fires once per code until the limit changes.
	limitsMu sync.Mutex
	limits   map[string]int64
	// limitCache holds links' click limits for limitTTL (apply holds mu).
	limitCache map[string]cachedLimit

	stop chan struct{}
	done chan struct{}
}

// dayStat is the Y table's value: what one held day costs.
type dayStat struct {
	events uint64
	bytes  uint64 // keys and values of the day's blocks
}

// Open opens (or creates) the aggregator database, loads the visitor
// states still open, and starts the hourly retention goroutine.
func Open(cfg Config) (*Aggregator, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	cache := pebble.NewCache(blockCacheBytes + memTableReserve)
	opts := &pebble.Options{
		Cache:  cache,
		Logger: pebbleLogger{cfg.Logger},
		Merger: rollupMerger,
		// Blocks and operands are a steady append stream: a larger
		// memtable means fewer, larger flushes, and hot rollup keys get
		// their operands combined in the flush.
		MemTableSize:                memTableBytes,
		MemTableStopWritesThreshold: 2,
		FormatMajorVersion:          pebble.FormatValueSeparation,
	}
	// Raw blocks are large values written once and deleted a day at a
	// time: kept in blob files, compactions move a reference instead of
	// rewriting the events (which was a quarter of the aggregator's CPU),
	// and a day's retention frees whole files.
	opts.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
		return pebble.ValueSeparationPolicy{
			Enabled:               true,
			MinimumSize:           separateValuesFrom,
			MaxBlobReferenceDepth: 10,
			RewriteMinimumAge:     10 * time.Minute,
			TargetGarbageRatio:    0.5,
		}
	}
	// Segment and visitor lookups are point reads that usually miss:
	// bloom filters let a miss skip a table without reading it.
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(cfg.Dir, opts)
	if err != nil {
		cache.Unref()
		if strings.Contains(err.Error(), "merger name") {
			return nil, fmt.Errorf("cannot open aggregator database %q: %w: move the folder aside (its raw events can be read by the earlier release) and start again", cfg.Dir, ErrOldFormat)
		}
		return nil, fmt.Errorf("cannot open aggregator database %q: %w", cfg.Dir, err)
	}
	a := &Aggregator{
		cfg:      cfg,
		log:      cfg.Logger,
		m:        newReceiverMetrics(cfg.Metrics),
		rm:       newRollupMetrics(cfg.Metrics),
		db:       db,
		cache:    cache,
		visitors: newVisitorTable(db, cfg.MaxActiveVisitors),
		days:     make(map[day]dayStat),
		gens:     make(map[day]uint64),
		sketches: newSketchCache(sketchCacheBytes, cfg.Now),
		limits:   make(map[string]int64), limitCache: make(map[string]cachedLimit),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	fail := func(err error) (*Aggregator, error) {
		db.Close()
		cache.Unref()
		return nil, err
	}
	if err := a.checkFormat(); err != nil {
		return fail(err)
	}
	if err := a.loadDays(); err != nil {
		return fail(err)
	}
	if err := a.loadSealed(cfg.Now()); err != nil {
		return fail(err)
	}
	start := time.Now()
	first := uint32(dayOf(cfg.Now().UnixMilli()))
	first -= min(first, visitorDays-1)
	rows, open, err := a.visitors.loadFrom(first)
	if err != nil {
		return fail(err)
	}
	if err := a.loadJournalNext(); err != nil {
		return fail(err)
	}
	a.newPending()
	if err := a.resync(); err != nil {
		return fail(err)
	}
	a.log.Info("aggregator open", "dir", cfg.Dir, "raw_days", len(a.days), "visitor_states", rows,
		"open_visits", open, "load", time.Since(start).Round(time.Millisecond))
	a.updateGauges()
	go a.retentionLoop()
	return a, nil
}

// checkFormat writes the format key into a new database and refuses one
// of another format.
func (a *Aggregator) checkFormat() error {
	v, closer, err := a.db.Get(formatKey)
	if errors.Is(err, pebble.ErrNotFound) {
		it, err := a.db.NewIter(nil)
		if err != nil {
			return fmt.Errorf("cannot read aggregator database: %w", err)
		}
		empty := !it.First()
		if err := it.Close(); err != nil {
			return fmt.Errorf("cannot read aggregator database: %w", err)
		}
		if !empty {
			return fmt.Errorf("cannot open aggregator database %q: %w", a.cfg.Dir, ErrOldFormat)
		}
		if err := a.db.Set(formatKey, formatVersion, pebble.Sync); err != nil {
			return fmt.Errorf("cannot write aggregator format: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot read aggregator format: %w", err)
	}
	defer closer.Close()
	if !bytes.Equal(v, formatVersion) {
		return fmt.Errorf("cannot open aggregator database %q: format %q; this version reads %q: %w", a.cfg.Dir, v, formatVersion, ErrOldFormat)
	}
	return nil
}

// loadDays fills the in-memory mirror of the Y table.
func (a *Aggregator) loadDays() error {
	it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tabDay}, UpperBound: []byte{tabDay + 1}})
	if err != nil {
		return fmt.Errorf("cannot list raw days: %w", err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) != 5 {
			return fmt.Errorf("cannot list raw days: bad key %x", k)
		}
		var c counters
		if err := decodeCounters(it.Value(), &c); err != nil {
			return fmt.Errorf("cannot list raw days: %w", err)
		}
		a.days[day(binary.BigEndian.Uint32(k[1:]))] = dayStat{uint64(c[0]), uint64(c[1])}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("cannot list raw days: %w", err)
	}
	return nil
}

// Close stops the retention goroutine and closes the database. In-flight
// requests finish first; later calls return ErrClosed.
func (a *Aggregator) Close() error {
	a.life.Lock()
	if a.closed {
		a.life.Unlock()
		return nil
	}
	a.closed = true
	a.life.Unlock()
	close(a.stop)
	<-a.done
	a.mu.Lock()
	if err := a.checkpoint(); err != nil {
		a.log.Error("cannot write the last rollup checkpoint; the journal folds it at the next start", "err", err)
	}
	a.applyBatch.close()
	a.checkpointBatch.close()
	a.mu.Unlock()
	err := a.db.Close()
	a.cache.Unref()
	if err != nil {
		return fmt.Errorf("cannot close aggregator database: %w", err)
	}
	return nil
}

// enter marks the start of a read of the database, which first writes
// pending rollups (catchUp) so the read sees every acknowledged event;
// leave ends it.
func (a *Aggregator) enter() error {
	if err := a.enterWriter(); err != nil {
		return err
	}
	if err := a.catchUp(); err != nil {
		a.leave()
		return err
	}
	return nil
}

// enterWriter marks the start of a write (apply, seal, retention,
// rebuild), which deals with pending rollups under mu itself.
func (a *Aggregator) enterWriter() error {
	a.life.RLock()
	if a.closed {
		a.life.RUnlock()
		return query.ErrClosed
	}
	return nil
}

func (a *Aggregator) leave() { a.life.RUnlock() }

func (a *Aggregator) retentionLoop() {
	defer close(a.done)
	t := time.NewTicker(retentionInterval)
	defer t.Stop()
	s := time.NewTicker(sealInterval)
	defer s.Stop()
	c := time.NewTicker(a.cfg.CheckpointInterval / 2)
	defer c.Stop()
	for {
		if err := a.ApplyRetention(); err != nil && !errors.Is(err, query.ErrClosed) {
			a.log.Error("cannot apply retention", "err", err)
		}
		for wait := true; wait; {
			select {
			case <-a.stop:
				return
			case <-t.C:
				wait = false
			case <-s.C:
				if err := a.Seal(); err != nil && !errors.Is(err, query.ErrClosed) {
					a.log.Error("cannot seal rollups", "err", err)
				}
			case <-c.C:
				if err := a.checkpointIfDue(); err != nil && !errors.Is(err, query.ErrClosed) {
					a.log.Error("cannot write rollup checkpoint", "err", err)
				}
			}
		}
	}
}

// sealInterval is how often finished days are looked for: a day is read
// from its hours until it is sealed, a minute or so after midnight UTC.
const sealInterval = time.Minute

// Seal writes the day and month rows of every finished day and month
// (seal.go); the retention goroutine calls it every minute.
func (a *Aggregator) Seal() error {
	if err := a.enterWriter(); err != nil {
		return err
	}
	defer a.leave()
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.checkpoint(); err != nil {
		return err
	}
	return a.seal(a.cfg.Now())
}

// checkpointIfDue writes pending rollups once they are old enough, so an
// aggregator that stops receiving still writes what it folded.
func (a *Aggregator) checkpointIfDue() error {
	if a.pendingEvents.Load() == 0 {
		return nil
	}
	if err := a.enterWriter(); err != nil {
		return err
	}
	defer a.leave()
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.checkpointDue() && !a.pend.broken {
		return nil
	}
	return a.checkpoint()
}

// diskCheckInterval limits how often the disk usage gauge asks Pebble.
const diskCheckInterval = 10 * time.Second

// updateGauges copies the day mirror into the gauges. Callers hold mu or
// own the aggregator exclusively.
func (a *Aggregator) updateGauges() {
	var total dayStat
	for _, st := range a.days {
		total.events += st.events
		total.bytes += st.bytes
	}
	a.m.rawDays.Set(float64(len(a.days)))
	a.m.rawEvents.Set(float64(total.events))
	a.m.rawBytes.Set(float64(total.bytes))
	a.m.activeVisitors.Set(float64(len(a.visitors.active)))
	if now := time.Now(); now.Sub(a.diskCheck) >= diskCheckInterval {
		a.diskCheck = now
		a.m.diskBytes.Set(float64(a.db.Metrics().DiskSpaceUsage()))
	}
}

// getCounters reads a counter vector; a missing key reads as zero.
func getCounters(r pebble.Reader, key []byte, c *counters) error {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		*c = counters{}
		return nil
	}
	if err != nil {
		return err
	}
	defer closer.Close()
	return decodeCounters(v, c)
}

type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}
func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}
func (p pebbleLogger) Fatalf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
	panic(fmt.Sprintf(format, args...))
}

// The aggregator answers the stats APIs (rollup/api) through query.Backend.
var _ query.Backend = (*Aggregator)(nil)
