package ingest

import (
	"sync"
	"testing"
	"time"
)

func TestEventQueueOrderAndBound(t *testing.T) {
	q := newEventQueue(5) // 8 slots
	if q.cap() != 8 {
		t.Fatalf("cap: got %d; want 8", q.cap())
	}
	pes := make([]*pending, 20)
	for i := range pes {
		pes[i] = &pending{clickAt: int64(i)}
	}
	for lap := range 2 { // the second lap reuses every slot
		for i := range 8 {
			if !q.push(pes[lap*8+i]) {
				t.Fatalf("lap %d: push %d refused with room", lap, i)
			}
		}
		if q.push(pes[16]) {
			t.Fatalf("lap %d: a ninth push was taken; want the queue full", lap)
		}
		if q.Len() != 8 {
			t.Fatalf("lap %d: Len %d; want 8", lap, q.Len())
		}
		for i := range 8 {
			if got := q.pop(); got != pes[lap*8+i] {
				t.Fatalf("lap %d: pop %d: got event %v; want %d, in order", lap, i, got, lap*8+i)
			}
		}
		if got := q.pop(); got != nil || q.Len() != 0 {
			t.Fatalf("lap %d: empty queue gave %v, Len %d", lap, got, q.Len())
		}
	}
}

// TestEventQueueConcurrent: producers on every core and a consumer that
// parks when the queue is empty, as the writer does. Every pushed event
// arrives exactly once, each producer's in its order, and the consumer
// never sleeps through a push.
func TestEventQueueConcurrent(t *testing.T) {
	const producers, each = 4, 20_000
	q := newEventQueue(64) // small: producers often find it full
	var wg sync.WaitGroup
	pushed := make([][]int64, producers)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				pe := &pending{clickAt: int64(p)<<32 | int64(i)}
				if q.push(pe) {
					pushed[p] = append(pushed[p], pe.clickAt)
				}
				if i%1000 == 0 {
					time.Sleep(50 * time.Microsecond) // let the consumer park
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	got := make([][]int64, producers)
	take := func() {
		for pe := q.pop(); pe != nil; pe = q.pop() {
			p := pe.clickAt >> 32
			got[p] = append(got[p], pe.clickAt)
		}
	}
	finished := false
	for !finished {
		take()
		if !q.park() {
			continue
		}
		select {
		case <-q.wake:
		case <-done:
			finished = true
		case <-time.After(10 * time.Second):
			t.Fatalf("the consumer slept through a push (%d waiting)", q.Len())
		}
	}
	take()
	for p := range producers {
		if len(got[p]) != len(pushed[p]) {
			t.Fatalf("producer %d: got %d events; want the %d pushed", p, len(got[p]), len(pushed[p]))
		}
		for i := range got[p] {
			if got[p][i] != pushed[p][i] {
				t.Fatalf("producer %d: event %d out of order", p, i)
			}
		}
	}
}

// BenchmarkQueueHandoff is the cost of one event through the queue:
// pushes and pops in batches of 1,024, as the serving goroutines and the
// writer make them; the channel it replaced for comparison. (On one core,
// without contention: with producers on every core the channel's lock is
// also contended, the ring's tail only compared-and-swapped.)
func BenchmarkQueueHandoff(b *testing.B) {
	const batch = 1024
	pe := &pending{}
	b.Run("ring", func(b *testing.B) {
		q := newEventQueue(65536)
		b.ReportAllocs()
		for b.Loop() {
			for range batch {
				if !q.push(pe) {
					b.Fatal("full")
				}
			}
			for range batch {
				if q.pop() == nil {
					b.Fatal("empty")
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/batch, "ns/event")
	})
	b.Run("chan", func(b *testing.B) {
		ch := make(chan *pending, 65536)
		b.ReportAllocs()
		for b.Loop() {
			for range batch {
				select {
				case ch <- pe:
				default:
					b.Fatal("full")
				}
			}
			for range batch {
				select {
				case <-ch:
				default:
					b.Fatal("empty")
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/batch, "ns/event")
	})
}
