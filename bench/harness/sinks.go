package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/waymark/waymark/ingest"
)

// EventSource yields events in order (SpreadGen, HotGen).
type EventSource interface {
	Next(ev *ingest.Event) bool
}

// IngestStats is one sink's load of a stream of events.
type IngestStats struct {
	Events  int           `json:"events"`
	Batches int           `json:"batches"`
	Elapsed time.Duration `json:"elapsed_ns"` // from the start of the first request to the answer of the last
	// Stall is how long, inside Elapsed, the sender waited for the
	// generator to encode the next batch: when it is large, the figure
	// measures the generator, not the sink.
	Stall     time.Duration `json:"stall_ns"`
	RawBytes  int64         `json:"raw_bytes"`  // segments or TSV rows before compression
	SentBytes int64         `json:"sent_bytes"` // request bodies
}

// PerSecond is events per second of Elapsed.
func (s IngestStats) PerSecond() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Events) / s.Elapsed.Seconds()
}

// pipeline runs produce on its own goroutine, up to two items ahead of
// consume, and times consume from its first call to its last return.
func pipeline[T any](ctx context.Context, produce func() (T, bool), consume func(T) error) (elapsed, stall time.Duration, n int, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	items := make(chan T, 2)
	go func() {
		defer close(items)
		for {
			it, ok := produce()
			if !ok {
				return
			}
			select {
			case items <- it:
			case <-ctx.Done():
				return
			}
		}
	}()
	var start, last time.Time
	for {
		waitFrom := time.Now()
		it, ok := <-items
		if !ok {
			break
		}
		if start.IsZero() {
			start = time.Now()
		} else {
			stall += time.Since(waitFrom)
		}
		if err := consume(it); err != nil {
			return 0, 0, n, err
		}
		last = time.Now()
		n++
		if err := ctx.Err(); err != nil {
			return 0, 0, n, err
		}
	}
	return last.Sub(start), stall, n, nil
}

// nextSegments takes up to segmentsPerBatch segments of segmentEvents
// events from src (the last may be shorter), and reports whether src ran
// out.
func nextSegments(src EventSource, segmentEvents, segmentsPerBatch int) (segs [][]ingest.Event, done bool) {
	segs = make([][]ingest.Event, 0, segmentsPerBatch)
	for len(segs) < segmentsPerBatch && !done {
		seg := make([]ingest.Event, 0, segmentEvents)
		var ev ingest.Event
		for len(seg) < segmentEvents {
			if !src.Next(&ev) {
				done = true
				break
			}
			seg = append(seg, ev)
		}
		if len(seg) > 0 {
			segs = append(segs, seg)
		}
	}
	return segs, done
}

// ShipEvents sends src to an aggregator through s: segments of
// segmentEvents events, segmentsPerBatch of them per request, one request
// at a time as an edge's shipper does, the next batch encoded while the
// current one is in flight. progress, if set, gets a line every 10 %
// of total (0: no progress lines).
func ShipEvents(ctx context.Context, s *SegmentShipper, src EventSource, segmentEvents, segmentsPerBatch, total int, progress io.Writer) (IngestStats, error) {
	var st IngestStats
	done := false
	produce := func() (*ShipBatch, bool) {
		if done {
			return nil, false
		}
		var segs [][]ingest.Event
		segs, done = nextSegments(src, segmentEvents, segmentsPerBatch)
		if len(segs) == 0 {
			return nil, false
		}
		return s.Encode(segs), true
	}
	p := newIngestProgress(progress, total, "shipped")
	var err error
	st.Elapsed, st.Stall, st.Batches, err = pipeline(ctx, produce, func(b *ShipBatch) error {
		if err := s.Post(ctx, b); err != nil {
			return err
		}
		st.Events += b.Events
		st.RawBytes += int64(b.RawBytes)
		st.SentBytes += int64(len(b.Body))
		p.report(st.Events)
		return nil
	})
	return st, err
}

// InsertEvents sends src to ClickHouse in INSERTs of batchRows
// TabSeparated rows (EventsTableDDL's columns), one at a time, the next
// batch encoded while the current one is in flight.
func InsertEvents(ctx context.Context, ch *ClickHouse, table string, src EventSource, batchRows, total int, progress io.Writer) (IngestStats, error) {
	var st IngestStats
	type batch struct {
		rows []byte
		n    int
	}
	done := false
	produce := func() (batch, bool) {
		if done {
			return batch{}, false
		}
		var b batch
		var ev ingest.Event
		for b.n < batchRows {
			if !src.Next(&ev) {
				done = true
				break
			}
			b.rows = AppendEventTSV(b.rows, &ev)
			b.n++
		}
		return b, b.n > 0
	}
	insert := EventsInsert(table)
	p := newIngestProgress(progress, total, "inserted")
	var err error
	st.Elapsed, st.Stall, st.Batches, err = pipeline(ctx, produce, func(b batch) error {
		if err := ch.Insert(ctx, insert, b.rows); err != nil {
			return err
		}
		st.Events += b.n
		st.RawBytes += int64(len(b.rows))
		st.SentBytes += int64(len(b.rows))
		p.report(st.Events)
		return nil
	})
	return st, err
}

type ingestProgress struct {
	w       io.Writer
	total   int
	verb    string
	started time.Time
	printed int
}

func newIngestProgress(w io.Writer, total int, verb string) *ingestProgress {
	return &ingestProgress{w: w, total: total, verb: verb, started: time.Now()}
}

func (p *ingestProgress) report(done int) {
	if p.w == nil || p.total <= 0 {
		return
	}
	if tenth := done * 10 / p.total; tenth > p.printed {
		p.printed = tenth
		el := time.Since(p.started)
		fmt.Fprintf(p.w, "  %s %d/%d events (%d%%) in %v, %.0f/s\n", p.verb, done, p.total, tenth*10, el.Round(time.Millisecond), float64(done)/el.Seconds())
	}
}

// RegisterSites creates one site per domain (time zone UTC) with the
// owner's key and returns their ids.
func RegisterSites(ctx context.Context, api *APIClient, domains []string) ([]string, error) {
	ids := make([]string, len(domains))
	for i, d := range domains {
		var s struct {
			ID string `json:"id"`
		}
		if err := api.PostJSON(ctx, "/v1/sites", map[string]string{"domain": d, "timezone": "UTC"}, 201, &s); err != nil {
			return nil, fmt.Errorf("cannot register site %s: %w", d, err)
		}
		if s.ID == "" {
			return nil, fmt.Errorf("cannot register site %s: no id in the answer", d)
		}
		ids[i] = s.ID
	}
	return ids, nil
}

// PeakRSS returns the peak resident memory of process pid (VmHWM), in
// bytes.
func PeakRSS(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("cannot read the memory of %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("cannot read the memory of %d: %q", pid, line)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("cannot read the memory of %d: no VmHWM", pid)
}

// DirSize adds up the sizes of the regular files under dir.
func DirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
