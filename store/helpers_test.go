package store

import (
	"bytes"
	"io"
	"log/slog"
	"testing"
)

// testKey is a fixed, non-zero permutation key for tests.
var testKey = []byte("waymark-test-key")

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// openStore opens a real Pebble store in dir and closes it when the test ends.
func openStore(tb testing.TB, dir string) *Store {
	tb.Helper()
	s, err := Open(dir, Options{BlockCacheBytes: 8 << 20, Logger: quietLogger()})
	if err != nil {
		tb.Fatalf("Open(%q): %v", dir, err)
	}
	tb.Cleanup(func() {
		if s.db != nil { // tests that reopen close it themselves
			s.Close()
		}
	})
	return s
}

// closeStore closes s and marks it closed for the cleanup in openStore.
func closeStore(tb testing.TB, s *Store) {
	tb.Helper()
	if err := s.Close(); err != nil {
		tb.Fatalf("Close: %v", err)
	}
	s.db = nil
}

func newTestStore(tb testing.TB) *Store {
	tb.Helper()
	return openStore(tb, tb.TempDir())
}

func newPermuter(tb testing.TB, key []byte) *Permuter {
	tb.Helper()
	p, err := NewPermuter(key)
	if err != nil {
		tb.Fatalf("NewPermuter: %v", err)
	}
	return p
}

// apply runs fn inside one batch and commits it at index.
func apply(tb testing.TB, s *Store, index uint64, fn func(b *Batch) error) {
	tb.Helper()
	b := s.NewBatch()
	defer b.Close()
	if err := fn(b); err != nil {
		tb.Fatalf("batch at index %d: %v", index, err)
	}
	if err := b.Commit(index); err != nil {
		tb.Fatalf("Commit(%d): %v", index, err)
	}
}

func sampleLink(code, owner string, index uint64) Link {
	return Link{
		Code:      code,
		URL:       "https://example.com/" + code,
		Owner:     owner,
		CreatedAt: 1_700_000_000_000 + int64(index),
		UpdatedAt: 1_700_000_000_000 + int64(index),
		Status:    StatusActive,
		Redirect:  302,
		Index:     index,
	}
}

type kv struct{ k, v []byte }

// dump returns every key and value in s, in key order.
func dump(tb testing.TB, s *Store) []kv {
	tb.Helper()
	it, err := s.db.NewIter(nil)
	if err != nil {
		tb.Fatalf("NewIter: %v", err)
	}
	defer it.Close()
	var out []kv
	for valid := it.First(); valid; valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			tb.Fatalf("ValueAndErr: %v", err)
		}
		out = append(out, kv{bytes.Clone(it.Key()), bytes.Clone(v)})
	}
	if err := it.Error(); err != nil {
		tb.Fatalf("iterate: %v", err)
	}
	return out
}
