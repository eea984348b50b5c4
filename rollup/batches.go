package rollup

import "github.com/cockroachdb/pebble/v2"

// keptBatch keeps one Pebble batch, and its buffer, from commit to commit.
// A checkpoint's batch is tens of MiB and the segments' batch a few: made
// afresh every time, each grew by doubling into memory the kernel had to
// fault in and zero again (page faults and the checkpoint's commit were
// the largest items of the node's profile early in a run). Callers hold
// mu (one writer at a time).
type keptBatch struct{ b *pebble.Batch }

// maxKeptBatchBytes bounds what a kept batch holds on to. It is well below
// Pebble's large-batch threshold (half a memtable): a batch whose memtable
// size reaches that becomes a flushable memtable that keeps pointing at
// the batch's buffer after the commit, and must never be reused.
const maxKeptBatchBytes = memTableBytes / 4

// memTableBytesPerEntry bounds what Pebble adds to a batch's bytes for its
// memtable size: a skiplist node per entry (184 bytes at Pebble's
// maximum height of 20, plus the key trailer and padding).
const memTableBytesPerEntry = 256

// A batch kept by give stays below the large-batch threshold.
const _ = uint(memTableBytes/2 - 2*maxKeptBatchBytes)

// take returns the kept batch, or a new one with room for size bytes.
func (k *keptBatch) take(db *pebble.DB, size int) *pebble.Batch {
	b := k.b
	k.b = nil
	if b == nil {
		return db.NewBatchWithSize(size, pebble.WithMaxRetainedSizeBytes(maxKeptBatchBytes))
	}
	return b
}

// give takes back a batch from take once it is done with. A batch that
// did not commit, or whose memtable size may have reached
// maxKeptBatchBytes, is closed instead.
func (k *keptBatch) give(b *pebble.Batch, committed bool) {
	if !committed || b.Len()+int(b.Count())*memTableBytesPerEntry >= maxKeptBatchBytes || k.b != nil {
		b.Close()
		return
	}
	b.Reset()
	k.b = b
}

// close releases the kept batch (at Close).
func (k *keptBatch) close() {
	if k.b != nil {
		k.b.Close()
		k.b = nil
	}
}
