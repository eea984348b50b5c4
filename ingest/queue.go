package ingest

import (
	"sync/atomic"
)

// eventQueue is the bounded hand-off from the serving goroutines to the
// writer: many producers, one consumer, never blocking a producer. It is a
// ring of slots each with a sequence number (Vyukov's bounded queue), so a
// push is one compare-and-swap on the tail and two stores, with no lock:
// a channel send takes the channel's lock, which the serving goroutines on
// every core and the writer all contend for.
//
// The writer parks when the queue is empty; a producer wakes it only
// then (one atomic load per push otherwise), so while events keep coming
// and the writer lingers between batches, a push never wakes anything.
type eventQueue struct {
	tail atomic.Uint64 // next position to claim (producers)
	_    [56]byte
	head atomic.Uint64 // next position to take (the consumer; read by Len)
	_    [56]byte
	// parked is set by the consumer before it sleeps on wake; the first
	// producer to clear it sends the wake-up.
	parked atomic.Bool
	_      [63]byte
	wake   chan struct{}
	mask   uint64
	slots  []queueSlot
}

type queueSlot struct {
	// seq is pos when the slot is free for the push at pos, pos+1 once
	// that push is published, and pos+len(slots) once it is taken.
	seq atomic.Uint64
	pe  *pending
}

// newEventQueue makes a queue holding at least size events (rounded up to
// a power of two).
func newEventQueue(size int) *eventQueue {
	n := 1
	for n < size {
		n <<= 1
	}
	q := &eventQueue{wake: make(chan struct{}, 1), mask: uint64(n - 1), slots: make([]queueSlot, n)}
	for i := range q.slots {
		q.slots[i].seq.Store(uint64(i))
	}
	return q
}

// cap is how many events the queue holds.
func (q *eventQueue) cap() int { return len(q.slots) }

// Len is how many events wait (claimed ones not yet published included).
func (q *eventQueue) Len() int {
	h := q.head.Load()
	t := q.tail.Load()
	if t < h {
		return 0
	}
	return int(t - h)
}

// push adds pe, or reports false when the queue is full. Safe for
// concurrent use.
func (q *eventQueue) push(pe *pending) bool {
	pos := q.tail.Load()
	var slot *queueSlot
	for {
		slot = &q.slots[pos&q.mask]
		switch seq := slot.seq.Load(); {
		case seq == pos:
			if q.tail.CompareAndSwap(pos, pos+1) {
				slot.pe = pe
				slot.seq.Store(pos + 1)
				if q.parked.Load() && q.parked.CompareAndSwap(true, false) {
					select {
					case q.wake <- struct{}{}:
					default:
					}
				}
				return true
			}
			pos = q.tail.Load()
		case int64(seq-pos) < 0:
			return false // the slot still holds the event of the lap before: full
		default:
			pos = q.tail.Load() // another producer took pos
		}
	}
}

// pop takes the oldest event, or nil when there is none (or the oldest is
// claimed but not yet published; its producer wakes a parked consumer).
// Only the consumer calls it.
func (q *eventQueue) pop() *pending {
	h := q.head.Load()
	slot := &q.slots[h&q.mask]
	if slot.seq.Load() != h+1 {
		return nil
	}
	pe := slot.pe
	slot.pe = nil
	slot.seq.Store(h + uint64(len(q.slots)))
	q.head.Store(h + 1)
	return pe
}

// park marks the consumer asleep and reports true, unless an event is
// already there (then it stays awake and reports false). After true the
// consumer waits on q.wake, which a later push fills.
func (q *eventQueue) park() bool {
	q.parked.Store(true)
	h := q.head.Load()
	if q.slots[h&q.mask].seq.Load() == h+1 {
		q.parked.Store(false)
		return false
	}
	return true
}
