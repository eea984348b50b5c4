package rollup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
)

// Pebble sizing for the aggregator database.
const (
	blockCacheBytes = 32 << 20
	memTableBytes   = 64 << 20
	// memTableReserve is what memtables take out of the cache: Pebble
	// reserves every memtable's size in the block cache (the mutable one,
	// one being flushed, one kept for reuse). A cache no larger than that
	// caches nothing once the memtables have grown to full size, and every
	// rollup, sketch and visitor read goes to the file: filter, index and
	// data block read, checksummed and decompressed each time (applies
	// twice as slow in a node that has run for a while). The reservation
	// is accounting, not extra memory: the memtables exist either way.
	memTableReserve = 3 * memTableBytes
)

// ErrClosed is returned by every method called after Close.
var ErrClosed = errors.New("aggregator closed")

// Aggregator is the receiving side of the aggregator role: it stores the
// events of shipped segments exactly once, by day, and drops old days.
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

	// mu makes apply and retention the only writer, one at a time, so
	// duplicate checks and counter read-modify-writes see every earlier
	// commit. Reads do not take it.
	mu        sync.Mutex
	days      map[day]dayStat // mirror of the Y table
	diskCheck time.Time       // when diskBytes was last refreshed

	// limits remembers, per link code, the click limit already reported
	// to OnClickLimit, so it fires once per code until the limit changes.
	limitsMu sync.Mutex
	limits   map[string]int64

	stop chan struct{}
	done chan struct{}
}

// dayStat is the Y table's value: what one held day costs.
type dayStat struct {
	events uint64
	bytes  uint64 // keys and values of the day's events
}

func (s dayStat) encode() []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 16), s.events)
	return binary.BigEndian.AppendUint64(b, s.bytes)
}

func decodeDayStat(v []byte) (dayStat, error) {
	if len(v) != 16 {
		return dayStat{}, fmt.Errorf("cannot decode day record: %d bytes; want 16", len(v))
	}
	return dayStat{binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:])}, nil
}

// Open opens (or creates) the aggregator database and starts the hourly
// retention goroutine.
func Open(cfg Config) (*Aggregator, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	cache := pebble.NewCache(blockCacheBytes + memTableReserve)
	opts := &pebble.Options{
		Cache:  cache,
		Logger: pebbleLogger{cfg.Logger},
		// Raw events are a steady append stream: a larger memtable means
		// fewer, larger flushes and less L0 compaction work per event.
		MemTableSize: memTableBytes,
		// The cache is sized for this many memtables (memTableReserve).
		MemTableStopWritesThreshold: 2,
	}
	// Duplicate checks and segment lookups are point reads that usually
	// miss: bloom filters let a miss skip a table without reading it.
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(cfg.Dir, opts)
	if err != nil {
		cache.Unref()
		return nil, fmt.Errorf("cannot open aggregator database %q: %w", cfg.Dir, err)
	}
	a := &Aggregator{
		cfg:    cfg,
		log:    cfg.Logger,
		m:      newReceiverMetrics(cfg.Metrics),
		rm:     newRollupMetrics(cfg.Metrics),
		db:     db,
		cache:  cache,
		days:   make(map[day]dayStat),
		limits: make(map[string]int64),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	if err := a.loadDays(); err != nil {
		db.Close()
		cache.Unref()
		return nil, err
	}
	a.updateGauges()
	go a.retentionLoop()
	return a, nil
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
		st, err := decodeDayStat(it.Value())
		if err != nil {
			return err
		}
		a.days[day(binary.BigEndian.Uint32(k[1:]))] = st
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
	err := a.db.Close()
	a.cache.Unref()
	if err != nil {
		return fmt.Errorf("cannot close aggregator database: %w", err)
	}
	return nil
}

// enter marks the start of an operation on the database; leave ends it.
func (a *Aggregator) enter() error {
	a.life.RLock()
	if a.closed {
		a.life.RUnlock()
		return ErrClosed
	}
	return nil
}

func (a *Aggregator) leave() { a.life.RUnlock() }

func (a *Aggregator) retentionLoop() {
	defer close(a.done)
	t := time.NewTicker(retentionInterval)
	defer t.Stop()
	for {
		if err := a.ApplyRetention(); err != nil && !errors.Is(err, ErrClosed) {
			a.log.Error("cannot apply retention", "err", err)
		}
		if err := a.sweepVisitors(); err != nil && !errors.Is(err, ErrClosed) {
			a.log.Error("cannot sweep visitor states", "err", err)
		}
		select {
		case <-a.stop:
			return
		case <-t.C:
		}
	}
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
	if now := time.Now(); now.Sub(a.diskCheck) >= diskCheckInterval {
		a.diskCheck = now
		a.m.diskBytes.Set(float64(a.db.Metrics().DiskSpaceUsage()))
	}
}

// getUint64 reads a be64 value; a missing key reads as zero.
func getUint64(r pebble.Reader, key []byte) (uint64, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, fmt.Errorf("cannot read counter %x: %d bytes; want 8", key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// has reports whether key exists.
func has(r pebble.Reader, key []byte) (bool, error) {
	_, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	closer.Close()
	return true, nil
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
