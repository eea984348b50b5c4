package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Options tune the Pebble database.
type Options struct {
	// BlockCacheBytes sizes Pebble's block cache. Zero means 64 MiB.
	BlockCacheBytes int64
	// Logger receives Pebble's own log lines. Nil means slog.Default().
	Logger *slog.Logger
	// FS is the file system Pebble and Restore use. Nil means the OS's;
	// tests pass vfs.NewStrictMem() to simulate a power loss.
	FS vfs.FS
	// BeforeCommit, when set, runs before every Batch commit; an error it
	// returns fails the commit as a storage failure (ErrStorage). It is a
	// fault-injection point for tests of the FSM's halt; production leaves
	// it nil.
	BeforeCommit func() error
}

// Store is one node's replica of the link table and everything else the
// Raft log replicates.
type Store struct {
	db           *pebble.DB
	cache        interface{ Unref() }
	dir          string
	fs           vfs.FS
	beforeCommit func() error

	blocklist atomic.Pointer[Blocklist] // rebuilt at every commit that changes it
	blockGen  atomic.Uint32             // the published snapshot's generation
	domains   atomic.Pointer[DomainSet] // approved custom domains, rebuilt when one changes
}

// Open opens (or creates) the database in dir.
func Open(dir string, o Options) (*Store, error) {
	if o.BlockCacheBytes <= 0 {
		o.BlockCacheBytes = 64 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	cache := pebble.NewCache(o.BlockCacheBytes)
	opts := &pebble.Options{
		Cache:  cache,
		Logger: pebbleLogger{o.Logger},
		FS:     o.FS,
	}
	// Point lookups dominate: a bloom filter on every level lets a miss skip
	// the table without reading a data block.
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		cache.Unref()
		return nil, fmt.Errorf("cannot open store %q: %w", dir, err)
	}
	s := &Store{db: db, cache: cache, dir: dir, fs: o.FS, beforeCommit: o.BeforeCommit}
	if err := errors.Join(s.loadBlocklist(), s.loadDomains()); err != nil {
		s.Close()
		return nil, fmt.Errorf("cannot open store %q: %w", dir, err)
	}
	return s, nil
}

// Close flushes and closes the database.
func (s *Store) Close() error {
	err := s.db.Close()
	s.cache.Unref()
	if err != nil {
		return fmt.Errorf("cannot close store: %w", err)
	}
	return nil
}

// Flush forces every committed write to stable storage. The FSM calls it
// before a snapshot so that the snapshot's index is durable in Pebble too.
func (s *Store) Flush() error {
	if err := s.db.LogData(nil, pebble.Sync); err != nil {
		return fmt.Errorf("cannot sync store: %w", err)
	}
	return nil
}

// get calls fn with the value under key. fn must not keep the slice.
func get(r pebble.Reader, key []byte, fn func(v []byte) error) (bool, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, storageErr(err)
	}
	defer closer.Close()
	// fn decodes a stored record: bytes that do not decode are damage in
	// the store, not a fault of the command reading them.
	if err := fn(v); err != nil {
		return true, storageErr(err)
	}
	return true, nil
}

// GetLink loads the link for code into l. It reports false when the code
// has never been used.
func (s *Store) GetLink(code []byte, l *Link) (bool, error) {
	var kb [1 + MaxDomainLen + 1 + 64]byte // a custom domain's identifier fits too
	found, err := get(s.db, linkKey(kb[:0], code), func(v []byte) error { return DecodeLink(v, l) })
	if err != nil {
		return false, fmt.Errorf("cannot read link %q: %w", code, err)
	}
	return found, nil
}

// OwnerByKey returns the owner whose API key hashes to h.
func (s *Store) OwnerByKey(h KeyHash) (Owner, bool, error) {
	var id string
	found, err := get(s.db, keyHashKey(h), func(v []byte) error { id = string(v); return nil })
	if err != nil || !found {
		return Owner{}, false, err
	}
	return s.Owner(id)
}

// Owner returns the owner with the given id.
func (s *Store) Owner(id string) (Owner, bool, error) {
	var o Owner
	found, err := get(s.db, ownerKey(id), func(v []byte) error { return DecodeOwner(v, &o) })
	if err != nil {
		return Owner{}, false, fmt.Errorf("cannot read owner %q: %w", id, err)
	}
	return o, found, nil
}

// Idempotency returns the record for owner's idempotency key, if any.
func (s *Store) Idempotency(owner, key string) (Idempotency, bool, error) {
	var rec Idempotency
	found, err := get(s.db, idempotencyKey(owner, key), func(v []byte) error { return DecodeIdempotency(v, &rec) })
	if err != nil {
		return Idempotency{}, false, fmt.Errorf("cannot read idempotency record: %w", err)
	}
	return rec, found, nil
}

// AppliedIndex is the last Raft index whose effects are in the store.
func (s *Store) AppliedIndex() (uint64, error) { return appliedIndex(s.db) }

func appliedIndex(r pebble.Reader) (uint64, error) {
	var idx uint64
	_, err := get(r, keyApplied, func(v []byte) error {
		if len(v) != 8 {
			return ErrCorrupt
		}
		idx = binary.BigEndian.Uint64(v)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("cannot read applied index: %w", err)
	}
	return idx, nil
}

// Secret returns the cluster permutation key, once bootstrap has set it.
func (s *Store) Secret() ([]byte, bool, error) {
	var key []byte
	found, err := get(s.db, keySecret, func(v []byte) error { key = append([]byte(nil), v...); return nil })
	if err != nil {
		return nil, false, fmt.Errorf("cannot read cluster secret: %w", err)
	}
	return key, found, nil
}

// RegionSlot returns the slot assigned to a region name.
func (s *Store) RegionSlot(name string) (int, bool, error) {
	slot := -1
	found, err := get(s.db, regionKey(name), func(v []byte) error {
		if len(v) != 1 {
			return ErrCorrupt
		}
		slot = int(v[0])
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("cannot read region %q: %w", name, err)
	}
	return slot, found, nil
}

// Metrics exposes Pebble's own counters for the metrics endpoint.
func (s *Store) Metrics() *pebble.Metrics { return s.db.Metrics() }

type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}
func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

// Fatalf is Pebble's "cannot go on": it must not return. A full disk is
// named as such (the node's disk guard keeps a reserve so that it should
// not get here), so the log says what to fix rather than only panicking.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	for _, a := range args {
		if err, ok := a.(error); ok && IsStorageFull(err) {
			p.l.Error("the disk is full and Pebble cannot go on; free space in the data folder and restart the node (it refuses writes until --min-free-disk is free)",
				"component", "pebble", "err", msg)
			panic(fmt.Errorf("%w: %s", ErrStorageFull, msg))
		}
	}
	p.l.Error(msg, "component", "pebble")
	panic(msg)
}

// RegionCounter returns how many IDs of region slot's range have been
// handed out in blocks, as far as this replica has applied.
func (s *Store) RegionCounter(slot int) (uint64, error) {
	var next uint64
	_, err := get(s.db, counterKey(slot), func(v []byte) error {
		if len(v) != 8 {
			return ErrCorrupt
		}
		next = binary.BigEndian.Uint64(v)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("cannot read counter of region slot %d: %w", slot, err)
	}
	return next, nil
}
