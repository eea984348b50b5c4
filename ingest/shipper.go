package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
)

const (
	maxSegmentsPerBatch = 256
	shipBaseBackoff     = 250 * time.Millisecond
	maxAckBytes         = 1 << 20
)

// shipper moves sealed segments to the aggregator, oldest first, and
// deletes each one only after the aggregator has acknowledged it.
type shipper struct {
	p      *Pipeline
	url    string
	wakeCh chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	enc    *zstd.Encoder

	oldestSeq uint64 // seq whose created time is in p.oldestSealedMs
}

func newShipper(p *Pipeline) *shipper {
	ctx, cancel := context.WithCancel(context.Background())
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	url := ""
	if p.cfg.AggregatorURL != "" {
		url = strings.TrimRight(p.cfg.AggregatorURL, "/") + ShipPath
	}
	return &shipper{p: p, url: url, wakeCh: make(chan struct{}, 1), ctx: ctx, cancel: cancel,
		done: make(chan struct{}), enc: enc}
}

func (s *shipper) start() { go s.run() }

func (s *shipper) stop() {
	s.cancel()
	<-s.done
	s.enc.Close()
}

// wake tells the shipper a segment was sealed; it never blocks.
func (s *shipper) wake() {
	select {
	case s.wakeCh <- struct{}{}:
	default:
	}
}

func (s *shipper) run() {
	defer close(s.done)
	poll := max(s.p.cfg.SegmentMaxAge, time.Second)
	failures := 0
	for {
		more, err := s.round()
		switch {
		case err != nil:
			if s.ctx.Err() != nil {
				return // shutting down; the segments wait on disk
			}
			failures++
			s.p.m.shipRetries.Inc()
			wait := backoff(failures, s.p.cfg.ShipMaxBackoff)
			s.p.log.Warn("cannot ship segments; will retry", "err", err, "attempt", failures, "wait", wait)
			if !s.sleep(wait) {
				return
			}
		case more:
			failures = 0
		default:
			failures = 0
			t := time.NewTimer(poll)
			select {
			case <-s.ctx.Done():
				t.Stop()
				return
			case <-s.wakeCh:
				t.Stop()
			case <-t.C:
			}
		}
	}
}

func (s *shipper) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// backoff is exponential with full jitter: a random wait up to
// base*2^(n-1), capped.
func backoff(n int, ceiling time.Duration) time.Duration {
	d := ceiling
	if n < 30 {
		d = min(shipBaseBackoff<<(n-1), ceiling)
	}
	return d/2 + mrand.N(d/2+1)
}

// sealedSegment is a sealed file waiting to ship.
type sealedSegment struct {
	seq  uint64
	path string
	size int64
}

// listSealed returns the sealed segments, oldest first.
func (s *shipper) listSealed() ([]sealedSegment, error) {
	entries, err := os.ReadDir(s.p.cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("cannot list segment folder: %w", err)
	}
	var out []sealedSegment
	for _, e := range entries { // ReadDir sorts by name; fixed-width hex sorts by seq
		seq, ok := parseSegmentName(e.Name(), sealedSuffix)
		if !ok {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, sealedSegment{seq: seq, path: filepath.Join(s.p.cfg.Dir, e.Name()), size: info.Size()})
	}
	return out, nil
}

// round ships one batch. It reports whether more sealed segments wait.
func (s *shipper) round() (more bool, err error) {
	segs, err := s.listSealed()
	if err != nil {
		return false, err
	}
	s.noteOldest(segs)
	if s.url == "" || len(segs) == 0 {
		return false, nil
	}
	var batch []BatchSegment
	var files []sealedSegment
	var records []int
	var raw int64
	for _, sg := range segs {
		if len(batch) > 0 && (raw+sg.size > s.p.cfg.ShipBatchMaxBytes || len(batch) >= maxSegmentsPerBatch) {
			more = true
			break
		}
		data, err := os.ReadFile(sg.path)
		if err != nil {
			return false, fmt.Errorf("cannot read segment %d: %w", sg.seq, err)
		}
		h, n, damage := verifySealed(data)
		if damage == nil && (h.Seq != sg.seq || h.NodeID != s.p.cfg.NodeID) {
			damage = fmt.Errorf("%w: header names %q/%d", ErrCorruptSegment, h.NodeID, h.Seq)
		}
		if damage != nil {
			s.quarantine(sg, damage)
			continue
		}
		batch = append(batch, BatchSegment{Ref: SegmentRef{Node: h.NodeID, Seq: h.Seq}, Data: data})
		files = append(files, sg)
		records = append(records, n)
		raw += sg.size
	}
	if len(batch) == 0 {
		return more, nil
	}
	acked, err := s.post(batch)
	if err != nil {
		return more, err
	}
	missing := 0
	for i, b := range batch {
		if !acked[b.Ref] {
			missing++
			continue
		}
		if err := os.Remove(files[i].path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return more, fmt.Errorf("cannot delete shipped segment %d: %w", b.Ref.Seq, err)
		}
		s.p.pendingBytes.Add(-files[i].size)
		s.p.m.shippedSegments.Inc()
		s.p.m.shippedEvents.Add(records[i])
		s.p.m.shippedBytes.Add(int(files[i].size))
	}
	if missing > 0 {
		return more, fmt.Errorf("aggregator acknowledged %d of %d segments", len(batch)-missing, len(batch))
	}
	return more, nil
}

// noteOldest keeps the oldest-pending gauge current.
func (s *shipper) noteOldest(segs []sealedSegment) {
	if len(segs) == 0 {
		s.p.oldestSealedMs.Store(0)
		s.oldestSeq = 0
		return
	}
	if segs[0].seq == s.oldestSeq && s.p.oldestSealedMs.Load() != 0 {
		return
	}
	f, err := os.Open(segs[0].path)
	if err != nil {
		return
	}
	defer f.Close()
	buf := make([]byte, 32+maxNodeIDLen)
	n, _ := io.ReadFull(f, buf)
	if h, _, err := parseSegmentHeader(buf[:n]); err == nil {
		s.p.oldestSealedMs.Store(h.Created.UnixMilli())
		s.oldestSeq = segs[0].seq
	}
}

// quarantine renames a damaged sealed segment to <seq>.bad: it is never
// shipped, and an operator can inspect it.
func (s *shipper) quarantine(sg sealedSegment, damage error) {
	s.p.m.corruptSegments.Inc()
	s.p.log.Error("damaged sealed segment set aside, not shipped", "seq", sg.seq, "err", damage)
	bad := filepath.Join(s.p.cfg.Dir, segmentName(sg.seq, badSuffix))
	if err := os.Rename(sg.path, bad); err == nil {
		s.p.pendingBytes.Add(-sg.size)
	}
}

// post sends one batch and returns the set of acknowledged segments.
func (s *shipper) post(batch []BatchSegment) (map[SegmentRef]bool, error) {
	body := s.enc.EncodeAll(AppendBatch(nil, batch), nil)
	ctx, cancel := context.WithTimeout(s.ctx, 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("cannot build ship request: %w", err)
	}
	req.Header.Set("Content-Type", ShipContentType)
	req.Header.Set("Content-Encoding", "zstd")
	if s.p.cfg.ShipToken != "" {
		req.Header.Set("Authorization", "Bearer "+s.p.cfg.ShipToken)
	}
	resp, err := s.p.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot post segments: %w", err)
	}
	defer resp.Body.Close()
	ackBody, err := io.ReadAll(io.LimitReader(resp.Body, maxAckBytes))
	if err != nil {
		return nil, fmt.Errorf("cannot read aggregator answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("cannot post segments: aggregator answered %s: %.200s", resp.Status, ackBody)
	}
	var ack ShipAck
	if err := json.Unmarshal(ackBody, &ack); err != nil {
		return nil, fmt.Errorf("cannot decode aggregator answer: %w", err)
	}
	acked := make(map[SegmentRef]bool, len(ack.Acked))
	for _, r := range ack.Acked {
		acked[r] = true
	}
	return acked, nil
}
