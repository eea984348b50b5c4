package ingest

import (
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// segmentSyncer does every fsync of running segments on its own goroutine,
// so the writer keeps draining the queue while the disk syncs (an fsync
// takes tens of milliseconds on an ordinary disk, during which a writer
// that waited would let the queue fill at full redirect rate).
//
//   - Group commit: every interval, if the writer has handed bytes to the
//     kernel since the last sync, the open segment is fsynced.
//   - Sealing: the writer writes the footer, hands the file over and opens
//     the next segment at once; the syncer fsyncs the file, closes it,
//     renames it to <seq>.seg, fsyncs the folder and only then tells the
//     shipper. A seal is never visible before its bytes are durable.
//   - After a write error, the cut back to the last whole record (see
//     segmentWriter.abandon) is done here too.
//
// Jobs run in the order the writer hands them over, on one goroutine, so
// a file is only ever closed by the syncer, after every sync of it.
type segmentSyncer struct {
	dir      string
	interval time.Duration
	log      *slog.Logger
	pending  *atomic.Int64
	sealing  *atomic.Int64 // see segmentWriter.sealing; cleared once a job is done
	onSeal   func(seq uint64, n int, whole bool, created time.Time)
	// syncFile is (*os.File).Sync; tests slow it down.
	syncFile func(*os.File) error
	errors   *metrics.Counter

	open  atomic.Pointer[os.File] // the segment being written; nil between segments
	dirty atomic.Bool             // the writer wrote to it since the last sync
	jobs  chan syncJob
	done  chan struct{}
}

// syncJob hands a segment the writer is done with to the syncer.
type syncJob struct {
	f       *os.File
	seq     uint64
	records int
	created time.Time // the segment's header time, for the oldest-pending gauge
	// abandoned: a write failed; cut the file to cut bytes and seal the
	// records before it (none: leave it for the torn-tail rule).
	abandoned bool
	cut       int64
}

// syncJobQueue bounds seals waiting for the disk. Segments seal every
// SegmentMaxAge or SegmentMaxBytes, so it only fills when the disk cannot
// sync a segment in the time it takes to write 64; the writer then waits.
const syncJobQueue = 64

func (s *segmentSyncer) start() {
	s.jobs = make(chan syncJob, syncJobQueue)
	s.done = make(chan struct{})
	if s.syncFile == nil {
		s.syncFile = (*os.File).Sync
	}
	go s.run()
}

func (s *segmentSyncer) run() {
	defer close(s.done)
	tick := time.NewTicker(s.interval)
	defer tick.Stop()
	for {
		select {
		case j, ok := <-s.jobs:
			if !ok {
				return
			}
			s.finish(j)
		case <-tick.C:
			s.syncOpen()
		}
	}
}

// stop finishes every handed-over segment, then returns.
func (s *segmentSyncer) stop() {
	close(s.jobs)
	<-s.done
}

// syncOpen is the group commit of the open segment.
func (s *segmentSyncer) syncOpen() {
	if !s.dirty.Swap(false) {
		return
	}
	// A segment sealed since the writer marked it dirty is synced by its
	// seal job, which runs after this on the same goroutine.
	if f := s.open.Load(); f != nil {
		if err := s.syncFile(f); err != nil {
			s.errors.Inc()
			s.log.Error("cannot sync open segment", "file", filepath.Base(f.Name()), "err", err)
		}
	}
}

// finish makes a handed-over segment durable and seals it.
func (s *segmentSyncer) finish(j syncJob) {
	defer s.sealing.CompareAndSwap(j.created.UnixMilli(), 0) // after onSeal counted it as sealed
	path := filepath.Join(s.dir, segmentName(j.seq, openSuffix))
	if j.abandoned {
		err := j.f.Truncate(j.cut)
		if err == nil && j.records > 0 {
			_, err = j.f.WriteAt(appendFooter(nil, j.records), j.cut)
		}
		if err == nil && j.records > 0 {
			err = s.syncFile(j.f)
		}
		_ = j.f.Close()
		if err != nil || j.records == 0 {
			// Left as <seq>.open: the next Open applies the torn-tail rule.
			s.log.Error("segment left open after write error", "seq", j.seq, "err", err)
			return
		}
		s.pending.Add(footerLen)
	} else {
		err := s.syncFile(j.f)
		if cerr := j.f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			// Its bytes may not be on disk: never seal it. It stays
			// <seq>.open, and the next Open keeps what checks out.
			s.errors.Inc()
			s.log.Error("cannot sync segment; left open for recovery at the next start", "seq", j.seq, "err", err)
			return
		}
	}
	if err := sealFile(path, s.dir, j.seq); err != nil {
		s.errors.Inc()
		s.log.Error("cannot seal segment", "seq", j.seq, "err", err)
		return
	}
	if s.onSeal != nil {
		s.onSeal(j.seq, j.records, !j.abandoned, j.created)
	}
}
