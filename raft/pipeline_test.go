package raft

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
)

// blockingPipeline is hashicorp/raft's pipeline in the state the watchdog
// exists for: an append that waits on queues nothing drains, until the
// pipeline is closed.
type blockingPipeline struct {
	closed chan struct{}
	once   sync.Once
}

func (p *blockingPipeline) AppendEntries(*hraft.AppendEntriesRequest, *hraft.AppendEntriesResponse) (hraft.AppendFuture, error) {
	<-p.closed
	return nil, hraft.ErrPipelineShutdown
}
func (p *blockingPipeline) Consumer() <-chan hraft.AppendFuture { return nil }
func (p *blockingPipeline) Close() error {
	p.once.Do(func() { close(p.closed) })
	return nil
}

func TestWatchdogClosesStuckPipeline(t *testing.T) {
	var stuck atomic.Int32
	tr := &pipelineTransport{stuckAfter: 200 * time.Millisecond, stuck: func() { stuck.Add(1) },
		pipes: make(map[*watchedPipeline]struct{}), stop: make(chan struct{})}
	w := &watchedPipeline{AppendPipeline: &blockingPipeline{closed: make(chan struct{})}, t: tr}
	tr.pipes[w] = struct{}{}
	go tr.watch()
	defer close(tr.stop)
	done := make(chan error, 1)
	go func() {
		_, err := w.AppendEntries(&hraft.AppendEntriesRequest{}, &hraft.AppendEntriesResponse{})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, hraft.ErrPipelineShutdown) {
			t.Fatalf("append returned %v; want ErrPipelineShutdown", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stuck append was never freed")
	}
	if stuck.Load() != 1 {
		t.Fatalf("watchdog counted %d stuck pipelines; want 1", stuck.Load())
	}
	tr.mu.Lock()
	left := len(tr.pipes)
	tr.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d pipelines still tracked after the close; want 0", left)
	}
}

// closePipelines frees an append stuck in a pipeline at once, as Close
// needs before raft's Shutdown can finish.
func TestClosePipelinesFreesStuckAppend(t *testing.T) {
	tr := &pipelineTransport{stuckAfter: time.Hour, stuck: func() {},
		pipes: make(map[*watchedPipeline]struct{}), stop: make(chan struct{})}
	w := &watchedPipeline{AppendPipeline: &blockingPipeline{closed: make(chan struct{})}, t: tr}
	tr.pipes[w] = struct{}{}
	done := make(chan error, 1)
	go func() {
		_, err := w.AppendEntries(&hraft.AppendEntriesRequest{}, &hraft.AppendEntriesResponse{})
		done <- err
	}()
	for w.callSince.Load() == 0 { // the append has started
		time.Sleep(time.Millisecond)
	}
	tr.closePipelines()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("closePipelines did not free the stuck append")
	}
}
