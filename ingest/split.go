package ingest

import (
	"encoding/binary"
	"fmt"
)

// Partitions is the number of virtual partitions events are spread over
// when a node ships to several aggregators (DESIGN.md, "Several
// aggregators"). A site's events are all in one partition, so are a
// link's clicks: the state a visit needs is at one aggregator. It is part
// of the wire contract: every node must use the same number.
const Partitions = 64

// PartitionOf is an event's partition: the hash of its site id for site
// events, of its link code for clicks (an event has one or the other).
// A function of (site, code) only, so two events with the same pair are
// always in the same sub-segment.
func PartitionOf(ev *Event) int {
	if ev.SiteID != "" {
		return partitionOfKey(ev.SiteID)
	}
	return partitionOfKey(ev.Code)
}

func partitionOfKey[T string | []byte](key T) int {
	return int(fnv1a(key) % Partitions)
}

// fnv1a is 64-bit FNV-1a: fixed by its definition, so every node and
// every version computes the same partition.
func fnv1a[T string | []byte](s T) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// mix64 is splitmix64's finalizer: it spreads the rendezvous scores.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// rendezvousScore is aggregator name's weight for partition p; the
// highest weight owns p.
func rendezvousScore(nameHash uint64, p int) uint64 {
	return mix64(nameHash + uint64(p+1)*0x9e3779b97f4a7c15)
}

// PartitionOwners assigns every partition to one of names (the alive
// aggregators) by rendezvous hashing: partition p goes to the name with
// the highest score(name, p), ties to the smaller name. The answer
// depends on the set of names only, not on their order, so every node
// that sees the same membership computes the same owners; when a name
// leaves, only its partitions move, and when one joins, only the ones it
// now wins. owners[p] indexes names; with no names every owner is -1.
func PartitionOwners(names []string, owners *[Partitions]int) {
	hashes := make([]uint64, len(names))
	for i, n := range names {
		hashes[i] = fnv1a(n)
	}
	for p := range owners {
		best := -1
		var bestScore uint64
		for i := range names {
			s := rendezvousScore(hashes[i], p)
			if best < 0 || s > bestScore || (s == bestScore && names[i] < names[best]) {
				best, bestScore = i, s
			}
		}
		owners[p] = best
	}
}

// SubSegment is one partition's cut of a sealed segment in a Splitter's
// output: Data is a version 3 segment (its own header, footer and CRCs)
// with the whole segment's identity and Part = partition+1.
type SubSegment struct {
	Ref     SegmentRef
	Data    []byte
	Records int
	// Start and End locate Data in the buffer Split appended to.
	Start, End int
}

// Splitter cuts sealed segments into per-partition sub-segments. It keeps
// its buffers from call to call; not safe for concurrent use.
type Splitter struct {
	recs [Partitions][]int32 // offsets of each partition's records
	out  []byte              // what Split appends to
	keep []byte              // Split's own buffer, between calls
	subs []SubSegment
	ev   Event
	t    DropTally
}

// SplitInto is Split appending the sub-segments to dst, which it
// returns: a caller that collects the parts of several segments in one
// buffer keeps their Start and End, since a later append may move dst.
func (s *Splitter) SplitInto(dst, raw []byte, skip func(part uint16) bool) ([]byte, []SubSegment, error) {
	s.out = dst
	subs, err := s.split(raw, skip)
	dst, s.out = s.out, nil
	return dst, subs, err
}

// Split cuts raw, a sealed segment whose framing has been checked
// (verifySealed or more), into one sub-segment per partition that has a
// record, in partition order, skipping the parts skip reports (nil skips
// none). The bytes of each sub-segment depend on raw only: the same
// header fields with Part set, its records byte for byte in their order,
// a footer with their count. So a sub-segment sent again, to whichever
// aggregator, is the same segment. Drop tallies go with their link or
// site; unattributed ones to partition 0. The result is valid until the
// next call.
func (s *Splitter) Split(raw []byte, skip func(part uint16) bool) ([]SubSegment, error) {
	s.out = s.keep[:0]
	subs, err := s.split(raw, skip)
	s.keep, s.out = s.out, nil
	return subs, err
}

func (s *Splitter) split(raw []byte, skip func(part uint16) bool) ([]SubSegment, error) {
	h, start, err := parseSegmentHeader(raw)
	if err != nil {
		return nil, err
	}
	if h.Part != 0 {
		return nil, fmt.Errorf("cannot split segment %d of %q: %w: it is already part %d", h.Seq, h.NodeID, ErrCorruptSegment, h.Part)
	}
	for p := range s.recs {
		s.recs[p] = s.recs[p][:0]
	}
	off := start
	for off < len(raw) && raw[off] != 0 {
		payload, size, err := nextRecord(raw[off:])
		if err != nil {
			return nil, fmt.Errorf("cannot split segment %d of %q: %w: %v", h.Seq, h.NodeID, ErrCorruptSegment, err)
		}
		p, err := s.recordPartition(payload)
		if err != nil {
			return nil, fmt.Errorf("cannot split segment %d of %q: %w", h.Seq, h.NodeID, err)
		}
		s.recs[p] = append(s.recs[p], int32(off))
		off += size
	}
	s.subs = s.subs[:0]
	for p := range s.recs {
		part := uint16(p + 1)
		if len(s.recs[p]) == 0 || (skip != nil && skip(part)) {
			continue
		}
		begin := len(s.out)
		s.out = appendPartHeader(s.out, &h, part)
		for _, o := range s.recs[p] {
			_, size, _ := nextRecord(raw[o:])
			s.out = append(s.out, raw[int(o):int(o)+size]...)
		}
		s.out = appendFooter(s.out, len(s.recs[p]))
		ref := h.Ref()
		ref.Part = part
		s.subs = append(s.subs, SubSegment{Ref: ref, Records: len(s.recs[p]), Start: begin, End: len(s.out)})
	}
	for i := range s.subs {
		s.subs[i].Data = s.out[s.subs[i].Start:s.subs[i].End:s.subs[i].End]
	}
	return s.subs, nil
}

// recordPartition is the partition of one record. Events of the two
// current layouts are read without decoding (code and site are the
// first strings); older layouts and tallies are decoded.
func (s *Splitter) recordPartition(payload []byte) (int, error) {
	if isTally(payload) {
		if err := DecodeDropTally(payload, &s.t); err != nil {
			return 0, err
		}
		if s.t.Scope == ScopeUnknown {
			return 0, nil
		}
		return partitionOfKey(s.t.Name), nil
	}
	if len(payload) > 0 && (payload[0] == eventVersion3 || payload[0] == eventVersion4) {
		if code, site, ok := peekCodeSite(payload); ok {
			if len(site) > 0 {
				return partitionOfKey(site), nil
			}
			return partitionOfKey(code), nil
		}
	}
	if err := decodeRecord(payload, &s.ev, &s.t, false); err != nil {
		return 0, err
	}
	return PartitionOf(&s.ev), nil
}

// peekCodeSite returns the code and site id of a version 3 or 4 event
// encoding (codec.go) without decoding the rest.
func peekCodeSite(b []byte) (code, site []byte, ok bool) {
	off := 3 + 16
	if len(b) < off {
		return nil, nil, false
	}
	_, w := binary.Varint(b[off:])
	if w <= 0 {
		return nil, nil, false
	}
	off += w + 8
	if len(b) <= off {
		return nil, nil, false
	}
	if b[off] == 1 {
		off += 8
	}
	off++
	str := func() ([]byte, bool) {
		n, w := binary.Uvarint(b[min(off, len(b)):])
		if w <= 0 || uint64(len(b)-off-w) < n {
			return nil, false
		}
		v := b[off+w : off+w+int(n)]
		off += w + int(n)
		return v, true
	}
	if code, ok = str(); !ok {
		return nil, nil, false
	}
	if site, ok = str(); !ok {
		return nil, nil, false
	}
	return code, site, true
}
