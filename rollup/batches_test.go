package rollup

import (
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// TestKeptBatchReusedOnlyWhenSafe: a committed batch comes back empty and
// writes again; one that failed, or that may have been committed as a
// flushable memtable (which keeps pointing at its buffer), is not kept.
func TestKeptBatchReusedOnlyWhenSafe(t *testing.T) {
	db, err := pebble.Open(t.TempDir(), &pebble.Options{Logger: pebbleLogger{slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var k keptBatch
	b := k.take(db, 0)
	if err := b.Set([]byte("a"), []byte("1"), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	k.give(b, true)
	b2 := k.take(db, 0)
	if b2 != b {
		t.Fatalf("a committed small batch was not kept")
	}
	if b2.Count() != 0 || !b2.Empty() {
		t.Fatalf("kept batch holds %d entries; want none", b2.Count())
	}
	if err := b2.Set([]byte("b"), []byte("2"), nil); err != nil {
		t.Fatal(err)
	}
	if err := b2.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"a": "1", "b": "2"} {
		v, closer, err := db.Get([]byte(key))
		if err != nil {
			t.Fatalf("Get %q: %v", key, err)
		}
		if string(v) != want {
			t.Errorf("%q = %q; want %q", key, v, want)
		}
		closer.Close()
	}
	k.give(b2, false) // did not commit: closed
	if k.b != nil {
		t.Fatalf("a batch that did not commit was kept")
	}
	// Entries whose memtable size may reach the limit: not kept.
	b3 := k.take(db, 0)
	for i := range maxKeptBatchBytes/memTableBytesPerEntry + 1 {
		key := []byte{byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}
		if err := b3.Set(key, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if b3.Len() >= maxKeptBatchBytes {
		t.Fatalf("test batch is %d bytes; want it below %d, so only its entries count", b3.Len(), maxKeptBatchBytes)
	}
	if err := b3.Commit(pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	k.give(b3, true)
	if k.b != nil {
		t.Fatalf("a batch of %d entries was kept", b3.Count())
	}
	k.close()
}
