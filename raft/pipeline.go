package raft

import (
	"sync"
	"sync/atomic"
	"time"

	hraft "github.com/hashicorp/raft"
)

// pipelineTransport is raft's network transport with every append
// pipeline watched. In hashicorp/raft v1.7.3 a pipelined AppendEntries can
// block for good: when a follower answers an append with a failure (a full
// disk, say), the leader's response decoder stops reading, the two queues
// of 128 in-flight appends fill, and the replication goroutine waits on
// them with nothing left to drain them; raft's Shutdown then waits for it
// too. Closing the pipeline is what unblocks it (the call returns
// ErrPipelineShutdown, and raft falls back to plain appends and builds a
// new pipeline), so a watchdog closes any pipeline whose AppendEntries has
// been blocked longer than a healthy follower ever takes (twice the
// transport's timeout, after which every response has either come or
// failed), and Close closes them all before raft shuts down.
type pipelineTransport struct {
	*hraft.NetworkTransport
	stuckAfter time.Duration
	stuck      func() // counts a pipeline the watchdog closed

	mu    sync.Mutex
	pipes map[*watchedPipeline]struct{}
	stop  chan struct{}
	once  sync.Once
}

func newPipelineTransport(t *hraft.NetworkTransport, timeout time.Duration, stuck func()) *pipelineTransport {
	p := &pipelineTransport{NetworkTransport: t, stuckAfter: 2 * timeout, stuck: stuck,
		pipes: make(map[*watchedPipeline]struct{}), stop: make(chan struct{})}
	go p.watch()
	return p
}

// AppendEntriesPipeline returns the transport's pipeline, watched.
func (t *pipelineTransport) AppendEntriesPipeline(id hraft.ServerID, target hraft.ServerAddress) (hraft.AppendPipeline, error) {
	inner, err := t.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	w := &watchedPipeline{AppendPipeline: inner, t: t}
	t.mu.Lock()
	t.pipes[w] = struct{}{}
	t.mu.Unlock()
	return w, nil
}

// closePipelines closes every open pipeline, unblocking any append stuck
// in one.
func (t *pipelineTransport) closePipelines() {
	t.mu.Lock()
	pipes := make([]*watchedPipeline, 0, len(t.pipes))
	for w := range t.pipes {
		pipes = append(pipes, w)
	}
	t.mu.Unlock()
	for _, w := range pipes {
		w.Close()
	}
}

// Close stops the watchdog and closes the pipelines and the transport.
func (t *pipelineTransport) Close() error {
	t.once.Do(func() { close(t.stop) })
	t.closePipelines()
	return t.NetworkTransport.Close()
}

func (t *pipelineTransport) watch() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case now := <-tick.C:
			t.mu.Lock()
			var stuck []*watchedPipeline
			for w := range t.pipes {
				if since := w.callSince.Load(); since != 0 && now.Sub(time.Unix(0, since)) > t.stuckAfter {
					stuck = append(stuck, w)
				}
			}
			t.mu.Unlock()
			for _, w := range stuck {
				t.stuck()
				w.Close()
			}
		}
	}
}

// watchedPipeline records when an AppendEntries call began, until it
// returns.
type watchedPipeline struct {
	hraft.AppendPipeline
	t         *pipelineTransport
	callSince atomic.Int64 // Unix ns of the call in progress, 0 if none
	closeOnce sync.Once
	closeErr  error
}

func (w *watchedPipeline) AppendEntries(args *hraft.AppendEntriesRequest, resp *hraft.AppendEntriesResponse) (hraft.AppendFuture, error) {
	w.callSince.Store(time.Now().UnixNano())
	defer w.callSince.Store(0)
	return w.AppendPipeline.AppendEntries(args, resp)
}

func (w *watchedPipeline) Close() error {
	w.closeOnce.Do(func() {
		w.t.mu.Lock()
		delete(w.t.pipes, w)
		w.t.mu.Unlock()
		w.closeErr = w.AppendPipeline.Close()
	})
	return w.closeErr
}
