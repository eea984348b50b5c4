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
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

const (
	maxSegmentsPerBatch = 256
	shipBaseBackoff     = 250 * time.Millisecond
	maxAckBytes         = 1 << 20
	// unlistedRetry is how long a segment the aggregator answered for
	// neither way first waits before it is sent again; it doubles for
	// each further such answer, up to ShipMaxBackoff.
	unlistedRetry = time.Second
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
	enc    *zstd.Encoder // only for an aggregator that does not read s2
	// zstdOnly is set once the aggregator has refused s2 (an aggregator of
	// an earlier version); raw is the uncompressed batch, reused. Both are
	// used by the shipper goroutine only.
	zstdOnly bool
	raw      []byte
	s2w      *s2.Writer   // made on first use
	s2out    bytes.Buffer // its output before it is copied to a body of its size
	// arena holds the segment files of the batch being sent, reused from
	// round to round: the shipper would otherwise allocate every byte it
	// ships twice over, and on an edge that allocation rate, not the
	// redirects, sets how often the garbage collector runs.
	arena []byte
	m     shipMetrics
	state shipState
	gate  *busyGate // nil: never holds (Config.DeferShipWhileBusy)
	// heldNs is the time gate has held segments back, for the metric.
	heldNs atomic.Int64

	oldestSeq uint64 // seq whose created time is in p.oldestSealedMs
	// deferred holds segments answers left unacknowledged: when each may
	// be sent again and how often it was left out. reidentified holds the
	// segments rewritten after a conflict. Both are used by the shipper
	// goroutine only.
	deferred     map[uint64]deferral
	reidentified map[uint64]bool
	// multi is the state of shipping to several aggregators
	// (shipsplit.go); shipper goroutine only.
	multi multiShip

	// written holds the sealed segments this process wrote whole (see
	// checkBeforeSend). The syncer adds to it, the shipper reads and
	// prunes it.
	writtenMu sync.Mutex
	written   map[uint64]bool
}

// deferral is a segment waiting to be sent again.
type deferral struct {
	until time.Time
	times int
}

// deferSeg holds a segment back: a second, doubling per time, up to ShipMaxBackoff.
// It returns the wait.
func (s *shipper) deferSeg(seq uint64, now time.Time) time.Duration {
	d := s.deferred[seq]
	d.times++
	wait := s.p.cfg.ShipMaxBackoff
	if d.times < 30 {
		wait = min(unlistedRetry<<(d.times-1), wait)
	}
	d.until = now.Add(wait)
	s.deferred[seq] = d
	return wait
}

func newShipper(p *Pipeline) *shipper {
	ctx, cancel := context.WithCancel(context.Background())
	// The shipper runs on the edge's serving core, so it compresses with
	// s2: about 0.12-0.15 µs an event for a ratio of 3.6, against zstd's
	// fastest level at 0.38 µs and 4.2 in the same run
	// (BenchmarkShipEncode). zstd stays for an aggregator that does not
	// read s2.
	url := ""
	if p.cfg.AggregatorURL != "" {
		url = strings.TrimRight(p.cfg.AggregatorURL, "/") + ShipPath
	}
	s := &shipper{p: p, url: url, wakeCh: make(chan struct{}, 1), ctx: ctx, cancel: cancel,
		done: make(chan struct{}), deferred: map[uint64]deferral{}, reidentified: map[uint64]bool{}, written: map[uint64]bool{}}
	s.m = newShipMetrics(p.cfg.Metrics, s)
	if p.cfg.DeferShipWhileBusy > 0 {
		// Events taken in: written, or queued for a writer that is busy
		// (sealing, syncing) and would otherwise look like a lull.
		taken := func() uint64 { return p.m.written.Get() + uint64(p.queue.Len()) }
		s.gate = newBusyGate(p.cfg.DeferShipWhileBusy, taken, &s.heldNs, p.log.Debug)
	}
	return s
}

func (s *shipper) start() { go s.run() }

func (s *shipper) stop() {
	s.cancel()
	<-s.done
	if s.enc != nil {
		s.enc.Close()
	}
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
		if s.p.pendingBytes.Load() > 0 {
			if d := s.gate.hold(s.p.now()); d > 0 {
				if !s.sleep(d) {
					return
				}
				continue
			}
		}
		more, err := s.round()
		if !more && err == nil {
			s.gate.drained()
		}
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
			t := time.NewTimer(s.nextDue(poll))
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

// listSealed returns the sealed segments, oldest first, and takes stock of
// the .bad ones for ShipStatus.
func (s *shipper) listSealed() ([]sealedSegment, error) {
	entries, err := os.ReadDir(s.p.cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("cannot list segment folder: %w", err)
	}
	var out []sealedSegment
	var bad badStock
	for _, e := range entries { // ReadDir sorts by name; fixed-width hex sorts by seq
		if _, ok := parseSegmentName(e.Name(), badSuffix); ok {
			bad.add(e)
			continue
		}
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
	s.state.setBad(bad)
	return out, nil
}

// round ships one batch of the segments that are due, oldest first. It
// reports whether more are due right away. An error means the request
// itself failed (the caller backs off); a 200 answer is never an error,
// whatever it acknowledged.
func (s *shipper) round() (more bool, err error) {
	seen := s.p.oldestSealedMs.Load() // before listing: a seal after it is not lost
	segs, err := s.listSealed()
	if err != nil {
		return false, err
	}
	s.noteOldest(seen, segs)
	s.forgetDeferred(segs)
	url := s.url
	if s.p.cfg.Aggregators != nil {
		targets := s.p.cfg.Aggregators()
		if len(segs) > 0 && (len(targets) > 1 || s.multi.splitting()) {
			return s.roundMulti(segs, targets)
		}
		if len(targets) == 1 {
			url = strings.TrimRight(targets[0].URL, "/") + ShipPath
		}
	}
	if url == "" || len(segs) == 0 {
		return false, nil
	}
	now := time.Now()
	s.arena = s.arena[:0]
	var batch []BatchSegment
	var files []sealedSegment
	var records []int
	var raw int64
	for _, sg := range segs {
		switch s.admit(sg, now, len(batch), raw) {
		case admitLater:
			continue
		case admitFull:
			more = true
		}
		if more {
			break
		}
		data, h, n, ok, err := s.loadForSend(sg)
		if err != nil {
			return false, err
		}
		runtime.Gosched() // a segment's check takes up to a few ms (see encodeS2)
		if !ok {
			continue // damaged: set aside
		}
		s.multi.sentWhole(sg.seq)
		batch = append(batch, BatchSegment{Ref: h.Ref(), Data: data})
		files = append(files, sg)
		records = append(records, n)
		raw += sg.size
	}
	if len(batch) == 0 {
		return more, nil
	}
	ack, err := s.post(url, batch)
	if err != nil {
		s.state.failed(err)
		return more, err
	}
	s.state.shipped()
	acked := make(map[SegmentRef]bool, len(ack.Acked))
	for _, r := range ack.Acked {
		acked[r] = true
	}
	rejected := make(map[SegmentRef]string, len(ack.Rejected))
	for _, r := range ack.Rejected {
		rejected[r.SegmentRef] = r.Reason
	}
	unlisted := 0
	var wait time.Duration
	for i, b := range batch {
		sg := files[i]
		switch reason := rejected[b.Ref]; {
		case acked[b.Ref]:
			if err := os.Remove(sg.path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return more, fmt.Errorf("cannot delete shipped segment %d: %w", b.Ref.Seq, err)
			}
			delete(s.deferred, sg.seq)
			delete(s.reidentified, sg.seq)
			delete(s.multi.whole, sg.seq)
			s.untrust(sg.seq)
			s.p.pendingBytes.Add(-sg.size)
			s.p.m.shippedSegments.Inc()
			s.p.m.shippedEvents.Add(records[i])
			s.p.m.shippedBytes.Add(int(sg.size))
		case reason == RejectMalformed:
			s.m.rejected[RejectMalformed].Inc()
			s.quarantine(sg, "aggregator refused segment as malformed; set aside, not shipped again", errors.New(reason))
		case reason == RejectConflict && s.reidentified[sg.seq]:
			// Already rewritten under a fresh incarnation nobody else can
			// have used: a second conflict is the aggregator's fault.
			// Rotating again would only repeat it.
			s.m.rejected[RejectConflict].Inc()
			wait = s.deferSeg(sg.seq, now)
			s.p.log.Error("aggregator reports a conflict for a segment already given a fresh incarnation; will send it again",
				"seq", b.Ref.Seq, "incarnation", b.Ref.Inc, "retry_in", wait)
		case reason == RejectConflict:
			s.m.rejected[RejectConflict].Inc()
			if err := s.reidentify(sg, b); err != nil {
				return more, err
			}
			s.reidentified[sg.seq] = true
			more = true
		default:
			// Neither stored nor refused (the aggregator could not take
			// it this time, or an unknown reason): try it again later,
			// and go on with the rest of the backlog meanwhile.
			unlisted++
			wait = max(wait, s.deferSeg(sg.seq, now))
		}
	}
	if unlisted > 0 {
		s.p.log.Warn("aggregator left segments unacknowledged; will send them again",
			"unacknowledged", unlisted, "sent", len(batch), "retry_in", wait)
	}
	return more, nil
}

// reidentify answers a conflict: the aggregator holds other content under
// this segment's identity, which happens when a VM snapshot restore or a
// clone brought back an old incarnation together with an old next-seq.
// The folder moves to a new incarnation (if the conflict is about the
// current one) and the segment is rewritten under it, records unchanged;
// it ships in the next round under its new, unused identity.
// What admit says of the next sealed segment of a round.
const (
	admitNow   = iota // it goes in this round
	admitLater        // it is deferred (an earlier answer left it out): skip it
	admitFull         // the round holds n segments of raw bytes: it is full
)

func (s *shipper) admit(sg sealedSegment, now time.Time, n int, raw int64) int {
	if d, ok := s.deferred[sg.seq]; ok && now.Before(d.until) {
		return admitLater
	}
	if n > 0 && (raw+sg.size > s.p.cfg.ShipBatchMaxBytes || n >= maxSegmentsPerBatch) {
		return admitFull
	}
	return admitNow
}

// loadForSend reads a sealed segment and checks it before it is sent:
// ok is false when it was damaged and has been set aside (quarantine).
func (s *shipper) loadForSend(sg sealedSegment) (data []byte, h SegmentHeader, records int, ok bool, err error) {
	data, err = s.readSegment(sg.path)
	if err != nil {
		return nil, h, 0, false, fmt.Errorf("cannot read segment %d: %w", sg.seq, err)
	}
	h, records, damage := s.checkBeforeSend(sg.seq, data)
	if damage == nil && (h.Seq != sg.seq || h.NodeID != s.p.cfg.NodeID || h.Part != 0) {
		damage = fmt.Errorf("%w: header names %q/%d part %d", ErrCorruptSegment, h.NodeID, h.Seq, h.Part)
	}
	if damage != nil {
		s.p.m.corruptSegments.Inc()
		s.quarantine(sg, "damaged sealed segment set aside, not shipped", damage)
		return nil, h, 0, false, nil
	}
	return data, h, records, true, nil
}

func (s *shipper) reidentify(sg sealedSegment, b BatchSegment) error {
	inc := s.p.seg.inc
	cur := inc.load()
	if b.Ref.Inc == cur {
		next, err := inc.rotate(cur)
		if err != nil {
			return err
		}
		s.m.rotations.Inc()
		s.p.log.Warn("aggregator holds different content under this segment folder's identities (restored snapshot or clone?); starting a new incarnation",
			"seq", b.Ref.Seq, "old_incarnation", cur, "incarnation", next)
		cur = next
	}
	size, err := reidentify(sg.path, b.Data, cur)
	if err != nil {
		return err
	}
	s.p.pendingBytes.Add(size - sg.size)
	delete(s.deferred, sg.seq)
	s.untrust(sg.seq) // a new header, written by another path: check it all
	s.p.log.Info("segment re-identified after a conflict", "seq", b.Ref.Seq, "old_incarnation", b.Ref.Inc, "incarnation", cur)
	return nil
}

// readStep is how much of a segment file one read(2) asks for.
const readStep = 1 << 20

// readSegment reads a segment file into the arena. The slice it returns
// stays valid until the next round.
func (s *shipper) readSegment(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	start := len(s.arena)
	s.arena = slices.Grow(s.arena, int(info.Size()))[:start+int(info.Size())]
	// In steps of 1 MiB: a read(2) of a whole 8 MiB segment holds the
	// processor for milliseconds on an edge with GOMAXPROCS 1 (see
	// encodeS2).
	for off := start; off < len(s.arena); {
		end := min(off+readStep, len(s.arena))
		if _, err := io.ReadFull(f, s.arena[off:end]); err != nil {
			s.arena = s.arena[:start]
			return nil, err
		}
		off = end
		runtime.Gosched()
	}
	return s.arena[start:len(s.arena):len(s.arena)], nil
}

// writtenHere records that this process wrote segment seq whole and
// sealed it (called by the syncer after the rename).
func (s *shipper) writtenHere(seq uint64) {
	s.writtenMu.Lock()
	s.written[seq] = true
	s.writtenMu.Unlock()
}

// checkBeforeSend checks a sealed segment before it is sent, returning its
// header and record count. A segment that can never be stored is set
// aside here, not sent.
//
// A segment found on disk at start (recovered, or left by an earlier
// process) or rewritten after a conflict gets the whole check the
// aggregator runs: every record decoded. One this process wrote whole
// gets the framing check (header, every record's CRC, the footer): its
// records were encoded by AppendEvent from events that passed CheckEvent
// (the decoder's rules), and the CRCs, computed from those bytes when they
// were written, catch any change since. Decoding them again would cost
// about 0.17 µs an event on the serving core (BenchmarkSegmentCheck) to
// catch only an encoder bug, which the aggregator refuses as malformed
// anyway; the segment then ends as .bad all the same, counted in
// waymark_ingest_segments_rejected_total{reason="malformed"} instead.
func (s *shipper) checkBeforeSend(seq uint64, data []byte) (SegmentHeader, int, error) {
	s.writtenMu.Lock()
	trusted := s.written[seq]
	s.writtenMu.Unlock()
	if trusted {
		return verifySealed(data)
	}
	h, _, n, err := checkSegment(data)
	return h, n, err
}

// untrust drops seq from the segments written here.
func (s *shipper) untrust(seq uint64) {
	s.writtenMu.Lock()
	delete(s.written, seq)
	s.writtenMu.Unlock()
}

// forgetDeferred drops what it remembers of segments no longer on disk.
func (s *shipper) forgetDeferred(segs []sealedSegment) {
	s.writtenMu.Lock()
	prune := len(s.written) > 0
	s.writtenMu.Unlock()
	if len(s.deferred) == 0 && len(s.reidentified) == 0 && !prune && s.multi.empty() {
		return
	}
	on := make(map[uint64]bool, len(segs))
	for _, sg := range segs {
		on[sg.seq] = true
	}
	s.multi.forget(on)
	if prune {
		// One sealed since the listing is dropped too; it merely gets the
		// whole check.
		s.writtenMu.Lock()
		for seq := range s.written {
			if !on[seq] {
				delete(s.written, seq)
			}
		}
		s.writtenMu.Unlock()
	}
	for seq := range s.deferred {
		if !on[seq] {
			delete(s.deferred, seq)
		}
	}
	for seq := range s.reidentified {
		if !on[seq] {
			delete(s.reidentified, seq)
		}
	}
}

// nextDue is how long until the first deferred segment is due again, or
// ceiling if that is later (or nothing is deferred).
func (s *shipper) nextDue(ceiling time.Duration) time.Duration {
	now := time.Now()
	for _, d := range s.deferred {
		ceiling = min(ceiling, max(d.until.Sub(now), time.Millisecond))
	}
	return ceiling
}

// noteOldest keeps the oldest-pending gauge current from a listing. seen
// is the gauge read before the listing; a segment sealed since then has
// moved the gauge (noteSealed), and that value stays until the next
// listing, which will see its file.
func (s *shipper) noteOldest(seen int64, segs []sealedSegment) {
	if len(segs) == 0 {
		s.p.oldestSealedMs.CompareAndSwap(seen, 0)
		s.oldestSeq = 0
		return
	}
	if segs[0].seq == s.oldestSeq && seen != 0 {
		return
	}
	f, err := os.Open(segs[0].path)
	if err != nil {
		return
	}
	defer f.Close()
	buf := make([]byte, maxHeaderLen)
	n, _ := io.ReadFull(f, buf)
	if h, _, err := parseSegmentHeader(buf[:n]); err == nil && s.p.oldestSealedMs.CompareAndSwap(seen, h.Created.UnixMilli()) {
		s.oldestSeq = segs[0].seq
	}
}

// quarantine renames a sealed segment that must never ship to <seq>.bad,
// where an operator can inspect it; it no longer counts as pending.
func (s *shipper) quarantine(sg sealedSegment, msg string, why error) {
	s.p.log.Error(msg, "seq", sg.seq, "err", why)
	bad := filepath.Join(s.p.cfg.Dir, segmentName(sg.seq, badSuffix))
	if err := os.Rename(sg.path, bad); err != nil {
		s.p.log.Error("cannot set segment aside", "seq", sg.seq, "err", err)
		return
	}
	s.p.pendingBytes.Add(-sg.size)
	delete(s.deferred, sg.seq)
	s.untrust(sg.seq)
	if info, err := os.Stat(bad); err == nil {
		s.state.addBad(filepath.Base(bad), info.ModTime())
	}
}

// post sends one batch and returns the aggregator's answer.
func (s *shipper) post(url string, batch []BatchSegment) (ShipAck, error) {
	s.raw = AppendBatch(s.raw[:0], batch)
	if !s.zstdOnly {
		body, err := s.encodeS2()
		if err != nil {
			return ShipAck{}, err
		}
		ack, status, answer, err := s.send(url, body, "s2")
		if !(status == http.StatusBadRequest && bytes.Contains(answer, []byte("unsupported Content-Encoding"))) {
			return ack, err
		}
		// An aggregator of an earlier version: it reads zstd.
		s.zstdOnly = true
		s.p.log.Warn("aggregator does not read s2-compressed batches; sending zstd from now on (upgrade aggregators first)")
	}
	if s.enc == nil {
		s.enc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	}
	ack, _, _, err := s.send(url, s.enc.EncodeAll(s.raw, nil), "zstd")
	return ack, err
}

// encodeS2 compresses s.raw in s2's framed stream format, whose blocks
// carry a CRC32C of their contents: the block format has none, so bytes
// damaged on the way would decode into segments whose own CRCs then fail,
// and the aggregator would refuse good segments as malformed. The body
// gets its own allocation of the compressed size, since the HTTP
// transport may still read it after an error.
func (s *shipper) encodeS2() ([]byte, error) {
	const s2BlockSize = 1 << 20 // the Writer's default block size
	s.s2out.Reset()
	if s.s2w == nil {
		s.s2w = s2.NewWriter(&s.s2out, s2.WriterConcurrency(1))
	} else {
		s.s2w.Reset(&s.s2out)
	}
	// A block at a time, letting the redirects that share the CPU run in
	// between: a batch of 4 to 8 MiB takes some 10 ms to compress, and
	// Go would preempt the shipper only after 10 ms (see yieldEvery).
	for raw := s.raw; len(raw) > 0; {
		blk := raw[:min(len(raw), s2BlockSize)]
		raw = raw[len(blk):]
		if err := s.s2w.EncodeBuffer(blk); err != nil {
			return nil, fmt.Errorf("cannot compress batch: %w", err)
		}
		runtime.Gosched()
	}
	if err := s.s2w.Close(); err != nil {
		return nil, fmt.Errorf("cannot compress batch: %w", err)
	}
	return bytes.Clone(s.s2out.Bytes()), nil
}

// send posts one compressed batch. Besides the answer it returns the
// status and body of a refusal.
func (s *shipper) send(url string, body []byte, encoding string) (ShipAck, int, []byte, error) {
	ctx, cancel := context.WithTimeout(s.ctx, 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return ShipAck{}, 0, nil, fmt.Errorf("cannot build ship request: %w", err)
	}
	req.Header.Set("Content-Type", ShipContentType)
	req.Header.Set("Content-Encoding", encoding)
	if s.p.cfg.ShipToken != "" {
		req.Header.Set("Authorization", "Bearer "+s.p.cfg.ShipToken)
	}
	resp, err := s.p.cfg.HTTPClient.Do(req)
	if err != nil {
		return ShipAck{}, 0, nil, fmt.Errorf("cannot post segments: %w", err)
	}
	defer resp.Body.Close()
	ackBody, err := io.ReadAll(io.LimitReader(resp.Body, maxAckBytes))
	if err != nil {
		return ShipAck{}, resp.StatusCode, nil, fmt.Errorf("cannot read aggregator answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return ShipAck{}, resp.StatusCode, ackBody, fmt.Errorf("cannot post segments: aggregator answered %s: %.200s", resp.Status, ackBody)
	}
	var ack ShipAck
	if err := json.Unmarshal(ackBody, &ack); err != nil {
		return ShipAck{}, resp.StatusCode, nil, fmt.Errorf("cannot decode aggregator answer: %w", err)
	}
	return ack, resp.StatusCode, nil, nil
}
