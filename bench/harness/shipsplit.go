package harness

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/waymark/waymark/ingest"
)

// SplitStats is a ShipEventsSplit run: the whole stream's figures and
// each aggregator's share of it.
type SplitStats struct {
	IngestStats
	Parts   int           `json:"parts"` // segment parts posted, over every aggregator
	Targets []TargetShare `json:"targets"`
}

// TargetShare is what one aggregator of a split run was sent.
type TargetShare struct {
	Name    string `json:"name"`
	Events  int    `json:"events"`
	Parts   int    `json:"parts"`
	Batches int    `json:"batches"`
}

// ShipEventsSplit sends src to several aggregators the way an edge does
// when it knows more than one: each round of segmentsPerBatch sealed
// segments is cut into per-partition parts, and each aggregator gets one
// batch of the parts whose partitions it owns (ingest.PartitionOwners
// over the targets' names). Each aggregator has one request in flight at
// a time, all of them at once, as the edges of a cluster keep them busy
// together (a single edge posts to its owners one after another). The
// next round is cut while the current ones are in flight. Elapsed runs
// from the first request to the last acknowledgement; Stall is the time
// the aggregators' queues waited for the generator.
func ShipEventsSplit(ctx context.Context, s *SegmentShipper, targets []ShipTarget, src EventSource, segmentEvents, segmentsPerBatch, total int, progress io.Writer) (SplitStats, error) {
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.Name
	}
	var owners [ingest.Partitions]int
	ingest.PartitionOwners(names, &owners)
	st := SplitStats{Targets: make([]TargetShare, len(targets))}
	for i, t := range targets {
		st.Targets[i].Name = t.Name
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	type round struct {
		batches []*ShipBatch
		err     error
	}
	rounds := make(chan round, 2)
	go func() {
		defer close(rounds)
		for done := false; !done; {
			var segs [][]ingest.Event
			segs, done = nextSegments(src, segmentEvents, segmentsPerBatch)
			if len(segs) == 0 {
				return
			}
			bs, err := s.EncodeSplit(segs, &owners, len(targets))
			select {
			case rounds <- round{bs, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()

	var mu sync.Mutex // guards st and p from the workers
	p := newIngestProgress(progress, total, "shipped")
	var last time.Time
	queues := make([]chan *ShipBatch, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		queues[i] = make(chan *ShipBatch, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range queues[i] {
				if ctx.Err() != nil {
					continue // drain: the run has failed
				}
				if err := s.PostTo(ctx, t, b); err != nil {
					cancel(fmt.Errorf("aggregator %s: %w", t.Name, err))
					continue
				}
				now := time.Now()
				mu.Lock()
				sh := &st.Targets[i]
				sh.Events += b.Events
				sh.Parts += b.Segments()
				sh.Batches++
				st.Events += b.Events
				st.Parts += b.Segments()
				st.Batches++
				st.RawBytes += int64(b.RawBytes)
				st.SentBytes += int64(len(b.Body))
				if now.After(last) {
					last = now
				}
				p.report(st.Events)
				mu.Unlock()
			}
		}()
	}

	var start time.Time
	var stall time.Duration
	var err error
dispatch:
	for {
		waitFrom := time.Now()
		r, ok := <-rounds
		if !ok {
			break
		}
		if r.err != nil {
			err = r.err
			break
		}
		if start.IsZero() {
			start = time.Now()
		} else {
			stall += time.Since(waitFrom)
		}
		for i, b := range r.batches {
			if b == nil {
				continue
			}
			select {
			case queues[i] <- b:
			case <-ctx.Done():
				break dispatch
			}
		}
	}
	for _, q := range queues {
		close(q)
	}
	wg.Wait()
	if err == nil {
		err = context.Cause(ctx)
	}
	if err != nil {
		return st, err
	}
	if !start.IsZero() {
		st.Elapsed = last.Sub(start)
	}
	st.Stall = stall
	return st, nil
}
