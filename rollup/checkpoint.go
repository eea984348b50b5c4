package rollup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/waymark/waymark/ingest"
)

// Rollups are written at checkpoints, not with every batch. A batch is
// stored as raw blocks, segment records and one journal entry (the keys of
// its blocks) in one synced commit, and acknowledged; its events are then
// folded into the pending aggregation in memory (pending), which a
// checkpoint writes in one batch together with the deletion of the journal
// entries it covers. So a hot rollup key gets one operand per checkpoint
// instead of one per batch, and a visitor state is written once per
// checkpoint however many batches changed it.
//
// The journal is what makes this as safe as writing everything per batch:
// after a crash, or when a commit fails and memory can no longer be
// trusted, the pending aggregation is thrown away, the visitor states go
// back to their rows (which are the last checkpoint's), and the journal's
// segments are folded again from their blocks, in the order they were
// applied. A checkpoint and its journal deletion are one commit, so a
// segment is folded into the stored rollups exactly once.
//
// Reads see every acknowledged event: a query finds pending work and
// checkpoints first (catchUp).
type pending struct {
	f        *folder
	counters map[counterKey]int64
	events   int       // folded since the last checkpoint
	since    time.Time // wall time of the first of them
	// upTo: every journal entry before it is folded in.
	upTo uint64
	// broken: memory no longer matches the journal (a fold or checkpoint
	// failed); resync before folding anything else.
	broken bool
}

// Checkpoint defaults (Config.CheckpointInterval, Config.CheckpointEvents).
const (
	DefaultCheckpointInterval = 2 * time.Second
	DefaultCheckpointEvents   = 500_000
	// checkpointCells and checkpointVisits bound the pending delta's
	// cells and (cell, visitor) entries, whatever the event count: events
	// spread over many links and days touch more of both, and the flush
	// of a checkpoint takes a few times their size again.
	checkpointCells  = maxKeptCells / 2
	checkpointVisits = 4 << 20
)

// journalKey is the journal entry of the seq-th applied segment:
//
//	J seq(8) -> uvarint-length-prefixed keys of the segment's blocks
func journalKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{tabJournal}, seq)
}

// journalNextKey holds the sequence number the next journal entry takes,
// written with every checkpoint (the entries themselves are deleted).
var journalNextKey = []byte("!journal-next")

func (a *Aggregator) newPending() {
	a.pend = pending{f: &folder{d: a.takeDelta(), src: a.visitors}, counters: make(map[counterKey]int64)}
	a.pendingEvents.Store(0)
	a.m.pendingEvents.Set(0)
}

// foldStored folds events that are durably stored (their journal entries,
// up to upTo, committed) into the pending aggregation. Callers hold mu.
func (a *Aggregator) foldStored(evs []*ingest.Event, upTo uint64) error {
	if len(evs) == 0 {
		a.pend.upTo = max(a.pend.upTo, upTo)
		return nil
	}
	if a.pend.events == 0 {
		a.pend.since = time.Now()
	}
	for _, ev := range evs {
		countEvent(a.pend.counters, dayOf(ev.Time), ev)
		a.visitors.newestMS = max(a.visitors.newestMS, ev.Time)
		if _, err := a.pend.f.fold(ev); err != nil {
			a.pend.broken = true
			return err
		}
		a.pend.events++
	}
	a.pend.upTo = max(a.pend.upTo, upTo)
	a.pendingEvents.Store(int64(a.pend.events))
	a.m.pendingEvents.Set(float64(a.pend.events))
	return nil
}

// checkpointDue reports whether the pending aggregation is old or large
// enough to be written.
func (a *Aggregator) checkpointDue() bool {
	p := &a.pend
	return p.events > 0 && (p.events >= a.cfg.CheckpointEvents ||
		len(p.f.d.keys) >= checkpointCells || len(p.f.d.visits) >= checkpointVisits ||
		time.Since(p.since) >= a.cfg.CheckpointInterval)
}

// checkpoint writes the pending aggregation (rollup operands, counters,
// changed visitor states) and deletes the journal entries it covers, in
// one synced batch. On failure memory is marked broken: the entries are
// still there, and resync folds them again. Callers hold mu.
func (a *Aggregator) checkpoint() error {
	if a.pend.broken {
		return a.resync()
	}
	if a.pend.events == 0 {
		return nil
	}
	start := time.Now()
	now := a.cfg.Now()
	f := a.pend.f
	b := a.checkpointBatch.take(a.db, 0)
	a.visitors.closeIdle(f, now.UnixMilli())
	err := a.stageApply(b, f, a.pend.counters, now)
	if err == nil {
		err = a.stageJournalCut(b)
	}
	if err == nil {
		err = a.sketches.commit(func() error { return b.Commit(pebble.Sync) })
	}
	a.checkpointBatch.give(b, err == nil)
	if err != nil {
		a.sketches.discard()
		a.pend.broken = true
		a.m.checkpointsFailed.Inc()
		return fmt.Errorf("cannot write rollup checkpoint: %w", err)
	}
	a.visitors.committed()
	a.keepDelta(f.d)
	a.newPending()
	a.m.checkpoints.Inc()
	a.m.checkpointDuration.UpdateDuration(start)
	a.m.activeVisitors.Set(float64(len(a.visitors.active)))
	return nil
}

// stageJournalCut deletes the journal entries folded into what the batch
// writes and records where the next one starts.
func (a *Aggregator) stageJournalCut(b *pebble.Batch) error {
	if err := b.DeleteRange(journalKey(0), journalKey(a.pend.upTo), nil); err != nil {
		return fmt.Errorf("cannot stage journal cut: %w", err)
	}
	if err := b.Set(journalNextKey, binary.BigEndian.AppendUint64(nil, a.journalNext), nil); err != nil {
		return fmt.Errorf("cannot stage journal cut: %w", err)
	}
	return nil
}

// catchUp checkpoints pending work before a read, so a query answers
// every acknowledged event. It takes mu only when there is work.
func (a *Aggregator) catchUp() error {
	if a.pendingEvents.Load() == 0 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.checkpoint()
}

// resync throws the pending aggregation away, returns the visitor states
// it changed to their stored rows, and folds the journal's segments again
// from their blocks, in the order they were applied (at start-up, and
// after a failed fold or checkpoint). Callers hold mu or own a.
func (a *Aggregator) resync() error {
	a.visitors.failed()
	a.sketches.discard()
	a.newPending()
	start := time.Now()
	segs, events := 0, 0
	err := a.forEachJournalEntry(func(seq uint64, evs []*ingest.Event) error {
		if err := a.preloadVisitors(evs); err != nil {
			return err
		}
		if err := a.foldStored(evs, seq+1); err != nil {
			return err
		}
		segs++
		events += len(evs)
		if a.checkpointDue() {
			return a.checkpoint()
		}
		return nil
	})
	if err != nil {
		a.pend.broken = true
		return fmt.Errorf("cannot fold the journal again: %w", err)
	}
	a.m.journalReplayed.Add(segs)
	if segs > 0 {
		a.log.Info("folded the journal's segments again", "segments", segs, "events", events,
			"took", time.Since(start).Round(time.Millisecond))
	}
	return a.checkpoint()
}

// forEachJournalEntry calls fn with the stored events of every journal
// entry, in sequence order. A block the entry names that is not there
// (which no path should produce) is logged and skipped.
func (a *Aggregator) forEachJournalEntry(fn func(seq uint64, evs []*ingest.Event) error) error {
	it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tabJournal}, UpperBound: []byte{tabJournal + 1}})
	if err != nil {
		return fmt.Errorf("cannot read the journal: %w", err)
	}
	defer it.Close()
	var evs []ingest.Event
	var ptrs []*ingest.Event
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) != 9 {
			return fmt.Errorf("cannot read the journal: bad key %x", k)
		}
		seq := binary.BigEndian.Uint64(k[1:])
		evs = evs[:0]
		err := forEachJournalBlock(it.Value(), func(bk []byte) error {
			v, closer, err := a.db.Get(bk)
			if errors.Is(err, pebble.ErrNotFound) {
				a.log.Error("a journal entry names a raw block that is not stored", "seq", seq, "block", fmt.Sprintf("%x", bk))
				return nil
			}
			if err != nil {
				return fmt.Errorf("cannot read raw block %x: %w", bk, err)
			}
			defer closer.Close()
			var ev ingest.Event
			return forEachInBlock(bk, v, &ev, func(ev *ingest.Event) error {
				e := *ev
				e.Props = append([]ingest.Prop(nil), ev.Props...)
				evs = append(evs, e)
				return nil
			})
		})
		if err != nil {
			return err
		}
		ptrs = ptrs[:0]
		for i := range evs {
			ptrs = append(ptrs, &evs[i])
		}
		if err := fn(seq, ptrs); err != nil {
			return err
		}
	}
	return it.Error()
}

// appendJournalBlock adds one block key to a journal entry's value.
func appendJournalBlock(dst, key []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	return append(dst, key...)
}

func forEachJournalBlock(v []byte, fn func(key []byte) error) error {
	for len(v) > 0 {
		n, k := binary.Uvarint(v)
		if k <= 0 || n > uint64(len(v)-k) {
			return fmt.Errorf("cannot read the journal: bad entry")
		}
		if err := fn(v[k : k+int(n)]); err != nil {
			return err
		}
		v = v[k+int(n):]
	}
	return nil
}

// loadJournalNext reads where the journal's next entry starts: past the
// last entry held, or where the last checkpoint left it.
func (a *Aggregator) loadJournalNext() error {
	v, closer, err := a.db.Get(journalNextKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return fmt.Errorf("cannot read the journal: %w", err)
	default:
		if len(v) == 8 {
			a.journalNext = binary.BigEndian.Uint64(v)
		}
		closer.Close()
	}
	it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tabJournal}, UpperBound: []byte{tabJournal + 1}})
	if err != nil {
		return fmt.Errorf("cannot read the journal: %w", err)
	}
	defer it.Close()
	if it.Last() && len(it.Key()) == 9 {
		a.journalNext = max(a.journalNext, binary.BigEndian.Uint64(it.Key()[1:])+1)
	}
	return it.Error()
}
