package ingest

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// Aggregator is one aggregator a node may ship to (Config.Aggregators).
type Aggregator struct {
	// Name is what rendezvous hashing ranks: it must be the same on every
	// node (the aggregator's node name from gossip, or its URL as listed
	// in --aggregator-url).
	Name string
	URL  string // base URL; ShipPath is appended
	// Alive is membership's view (gossip's alive). A member that is not
	// alive keeps the split going but owns no partition.
	Alive bool
}

// errNoAggregatorAlive is a round with aggregators known but none alive.
var errNoAggregatorAlive = errors.New("no aggregator is alive")

// multiShip is the shipper's memory of segments shipped to several
// aggregators: which parts of each were acknowledged, which segments were
// first sent whole, and which aggregators failed lately. In memory only.
type multiShip struct {
	splitter   Splitter
	parts      []byte                     // the sub-segments of a round
	acked      map[uint64]map[uint16]bool // seq -> parts acknowledged
	whole      map[uint64]bool            // seqs sent whole at least once
	down       map[string]deferral        // aggregator name -> skipped until
	owners     [Partitions]int
	targetsBuf []Aggregator
}

// splitting reports whether a segment has parts acknowledged: its other
// parts must ship as parts whatever the membership now is.
func (m *multiShip) splitting() bool { return len(m.acked) > 0 }

func (m *multiShip) empty() bool { return len(m.acked) == 0 && len(m.whole) == 0 }

// sentWhole records that seq went out whole: it goes on going out whole,
// so that a half-stored whole segment is never sent again as parts (with
// other record numbers: DESIGN.md, "Several aggregators").
func (m *multiShip) sentWhole(seq uint64) {
	if m.whole == nil {
		m.whole = map[uint64]bool{}
	}
	m.whole[seq] = true
}

// forget drops what it remembers of segments no longer on disk.
func (m *multiShip) forget(on map[uint64]bool) {
	for seq := range m.acked {
		if !on[seq] {
			delete(m.acked, seq)
		}
	}
	for seq := range m.whole {
		if !on[seq] {
			delete(m.whole, seq)
		}
	}
}

// alive is the aggregators that own partitions now: alive in membership
// and not failed lately, sorted by name.
func (m *multiShip) alive(targets []Aggregator, now time.Time) []Aggregator {
	out := m.targetsBuf[:0]
	for _, t := range targets {
		if d, ok := m.down[t.Name]; t.Alive && (!ok || !now.Before(d.until)) {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b Aggregator) int { return strings.Compare(a.Name, b.Name) })
	m.targetsBuf = out
	return out
}

// failed skips an aggregator for a while after a failed request:
// doubling from a second up to ceiling. Its partitions move meanwhile.
func (m *multiShip) failed(name string, now time.Time, ceiling time.Duration) time.Duration {
	if m.down == nil {
		m.down = map[string]deferral{}
	}
	d := m.down[name]
	d.times++
	wait := ceiling
	if d.times < 30 {
		wait = min(unlistedRetry<<(d.times-1), ceiling)
	}
	d.until = now.Add(wait)
	m.down[name] = d
	return wait
}

// piece is one thing sent in a multi round: a part, or a whole segment.
type piece struct {
	seg        int // index into the round's segments
	ref        SegmentRef
	start, end int // in multiShip.parts, or -1 for the whole segment
	records    int
}

// roundSegment is a sealed segment in a multi round.
type roundSegment struct {
	sg      sealedSegment
	data    []byte
	records int
	pending int  // pieces sent and not acknowledged
	settled bool // quarantined, re-identified or deferred this round
}

// roundMulti ships one batch's worth of due segments to several
// aggregators: each segment is split by partition and each part goes to
// the owner of its partition among the alive aggregators (rendezvous
// hashing, PartitionOwners), one request per owner. A segment is deleted
// once every one of its parts is acknowledged, by whichever aggregators;
// the parts acknowledged are remembered, so only the rest is sent again.
// A failed request skips that aggregator for a while, so its partitions
// move to the others at the next round. A segment first sent whole (with
// one aggregator) keeps going whole, to the owner of partition 0.
func (s *shipper) roundMulti(segs []sealedSegment, targets []Aggregator) (more bool, err error) {
	m := &s.multi
	now := time.Now()
	alive := m.alive(targets, now)
	if len(alive) == 0 {
		err := fmt.Errorf("cannot ship segments: %w (of %d known)", errNoAggregatorAlive, len(targets))
		s.state.failed(err)
		return false, err
	}
	names := make([]string, len(alive))
	for i, a := range alive {
		names[i] = a.Name
	}
	PartitionOwners(names, &m.owners)
	if m.acked == nil {
		m.acked = map[uint64]map[uint16]bool{}
	}

	s.arena = s.arena[:0]
	m.parts = m.parts[:0]
	var round []roundSegment
	var pieces []piece
	var raw int64
	for _, sg := range segs {
		switch s.admit(sg, now, len(round), raw) {
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
		if !ok {
			continue // damaged: set aside
		}
		idx := len(round)
		round = append(round, roundSegment{sg: sg, data: data, records: n})
		raw += sg.size
		if m.whole[sg.seq] {
			pieces = append(pieces, piece{seg: idx, ref: h.Ref(), start: -1, records: n})
			continue
		}
		acked := m.acked[sg.seq]
		var subs []SubSegment
		m.parts, subs, err = m.splitter.SplitInto(m.parts, data, func(part uint16) bool { return acked[part] })
		if err != nil {
			s.p.m.corruptSegments.Inc()
			s.quarantine(sg, "sealed segment that cannot be split set aside, not shipped", err)
			round = round[:idx]
			continue
		}
		for _, sub := range subs {
			pieces = append(pieces, piece{seg: idx, ref: sub.Ref, start: sub.Start, end: sub.End, records: sub.Records})
		}
	}
	if len(round) == 0 {
		return more, nil
	}

	// One batch per owner.
	byOwner := make([][]int, len(alive))
	for i, pc := range pieces {
		p := 0
		if pc.ref.Part != 0 {
			p = int(pc.ref.Part) - 1
		}
		o := m.owners[p]
		byOwner[o] = append(byOwner[o], i)
		round[pc.seg].pending++
	}
	// A segment whose parts were all acknowledged before (an ack lost
	// after the last of them) has nothing left to send.
	for i := range round {
		if round[i].pending == 0 {
			if err := s.shippedSegment(&round[i]); err != nil {
				return more, err
			}
		}
	}
	failures := 0
	var lastErr error
	unlisted := 0
	var wait time.Duration
	for o, idxs := range byOwner {
		if len(idxs) == 0 {
			continue
		}
		batch := make([]BatchSegment, len(idxs))
		for j, i := range idxs {
			pc := pieces[i]
			data := round[pc.seg].data
			if pc.start >= 0 {
				data = m.parts[pc.start:pc.end:pc.end]
			}
			batch[j] = BatchSegment{Ref: pc.ref, Data: data}
		}
		url := strings.TrimRight(alive[o].URL, "/") + ShipPath
		s.m.partsSent.Add(len(batch))
		ack, err := s.post(url, batch)
		if err != nil {
			s.m.aggregatorFailures.Inc()
			failures++
			lastErr = err
			skip := m.failed(alive[o].Name, now, s.p.cfg.ShipMaxBackoff)
			s.p.log.Warn("cannot ship to an aggregator; its partitions go to the others meanwhile",
				"aggregator", alive[o].Name, "parts", len(batch), "skipped_for", skip, "err", err)
			more = true
			continue
		}
		delete(m.down, alive[o].Name)
		acked := make(map[SegmentRef]bool, len(ack.Acked))
		for _, r := range ack.Acked {
			acked[r] = true
		}
		rejected := make(map[SegmentRef]string, len(ack.Rejected))
		for _, r := range ack.Rejected {
			rejected[r.SegmentRef] = r.Reason
		}
		for _, i := range idxs {
			pc := pieces[i]
			rs := &round[pc.seg]
			if acked[pc.ref] {
				// Remembered even when the segment was settled otherwise
				// in this round: a stored part is never sent again.
				rs.pending--
				if pc.ref.Part != 0 {
					if m.acked[rs.sg.seq] == nil {
						m.acked[rs.sg.seq] = map[uint16]bool{}
					}
					m.acked[rs.sg.seq][pc.ref.Part] = true
				}
				if rs.pending == 0 && !rs.settled {
					if err := s.shippedSegment(rs); err != nil {
						return more, err
					}
				}
				continue
			}
			if rs.settled {
				continue
			}
			switch reason := rejected[pc.ref]; {
			case reason == RejectMalformed:
				rs.settled = true
				s.m.rejected[RejectMalformed].Inc()
				s.quarantine(rs.sg, "aggregator refused segment as malformed; set aside, not shipped again", errors.New(reason))
			case reason == RejectConflict && s.reidentified[rs.sg.seq]:
				rs.settled = true
				s.m.rejected[RejectConflict].Inc()
				wait = max(wait, s.deferSeg(rs.sg.seq, now))
				s.p.log.Error("aggregator reports a conflict for a segment already given a fresh incarnation; will send it again",
					"seq", pc.ref.Seq, "part", pc.ref.Part, "incarnation", pc.ref.Inc, "retry_in", wait)
			case reason == RejectConflict:
				// The parts acknowledged stay acknowledged (they are stored
				// under the old identity); the rest go under the new one.
				rs.settled = true
				s.m.rejected[RejectConflict].Inc()
				if err := s.reidentify(rs.sg, BatchSegment{Ref: SegmentRef{Node: pc.ref.Node, Inc: pc.ref.Inc, Seq: pc.ref.Seq}, Data: rs.data}); err != nil {
					return more, err
				}
				s.reidentified[rs.sg.seq] = true
				more = true
			default:
				rs.settled = true
				unlisted++
				wait = max(wait, s.deferSeg(rs.sg.seq, now))
			}
		}
	}
	if unlisted > 0 {
		s.p.log.Warn("aggregators left segments unacknowledged; will send them again",
			"unacknowledged", unlisted, "segments", len(round), "retry_in", wait)
	}
	if failures == len(nonEmpty(byOwner)) && failures > 0 {
		s.state.failed(lastErr)
		return more, lastErr
	}
	s.state.shipped()
	return more, nil
}

func nonEmpty(groups [][]int) []int {
	var out []int
	for i, g := range groups {
		if len(g) > 0 {
			out = append(out, i)
		}
	}
	return out
}

// shippedSegment deletes a segment all of whose parts are acknowledged.
func (s *shipper) shippedSegment(rs *roundSegment) error {
	rs.settled = true
	sg := rs.sg
	if err := os.Remove(sg.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cannot delete shipped segment %d: %w", sg.seq, err)
	}
	delete(s.multi.acked, sg.seq)
	delete(s.multi.whole, sg.seq)
	delete(s.deferred, sg.seq)
	delete(s.reidentified, sg.seq)
	s.untrust(sg.seq)
	s.p.pendingBytes.Add(-sg.size)
	s.p.m.shippedSegments.Inc()
	s.p.m.shippedEvents.Add(rs.records)
	s.p.m.shippedBytes.Add(int(sg.size))
	s.m.splitSegments.Inc()
	return nil
}
