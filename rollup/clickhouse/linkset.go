package clickhouse

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/axiomhq/hyperloglog"
)

// A link row's visitors (migration 7; DESIGN.md, "Link rows"): the
// embedded store's visitor set, so both backends give the same estimate
// over the same hours: up to linkListMax distinct hashes as a sorted
// list (exact), more as an axiomhq/hyperloglog sketch of precision 14
// (2^14 registers, 0.81 % standard error) fed the visitor hash mixed
// (splitmix64's finalizer: the embedded store inserts it as it is, which
// misestimates hashes that are not uniform, as the test world's small
// ones; so past 128 visitors the two backends agree within the bound,
// not bit for bit).
// Encoded as the embedded store encodes it: 'L' uvarint count, uvarint
// deltas; or 'S' and the sketch's binary form.
const (
	linkSetList      = 'L'
	linkSetSketch    = 'S'
	linkListMax      = 128
	linkPrecision    = 14
	linkDenseHashes  = 2048 // past this many, a sketch is built dense: n inserts into a sparse one cost n^2/328 steps
	linkSetOverheads = 64   // bytes a decoded set costs besides its hashes and registers (cache accounting)
)

var errBadLinkSet = errors.New("malformed link visitor set")

// linkSet is a decoded visitor set: hashes (while a list, or before they
// are folded into sk) and a sketch once there is one.
type linkSet struct {
	hashes []uint64
	sk     *hyperloglog.Sketch
	dense  bool
}

func newLinkSketch(dense bool) *hyperloglog.Sketch {
	sk, err := hyperloglog.NewSketch(linkPrecision, !dense)
	if err != nil {
		panic("BUG: " + err.Error())
	}
	return sk
}

// linkSetOf is the set of hashes (any order, repeats allowed).
func linkSetOf(hashes []uint64) *linkSet {
	s := &linkSet{hashes: hashes}
	s.compact()
	return s
}

// compact sorts and deduplicates the hashes and folds them into the
// sketch once there is one or they are more than linkListMax.
func (s *linkSet) compact() {
	slices.Sort(s.hashes)
	s.hashes = slices.Compact(s.hashes)
	if s.sk == nil && len(s.hashes) <= linkListMax {
		return
	}
	if s.sk == nil {
		s.sk, s.dense = newLinkSketch(len(s.hashes) > linkDenseHashes), len(s.hashes) > linkDenseHashes
	}
	for _, h := range s.hashes {
		s.sk.InsertHash(mixHash(h))
	}
	s.hashes = nil
}

// add unions o into s (o unchanged). A union with a sketch is kept
// dense: merging into 2^14 registers is one pass over o's.
func (s *linkSet) add(o *linkSet) error {
	s.hashes = append(s.hashes, o.hashes...)
	if o.sk == nil {
		return nil
	}
	if !s.dense {
		d := newLinkSketch(true)
		if s.sk != nil {
			if err := d.Merge(s.sk); err != nil {
				return fmt.Errorf("cannot merge link visitors: %w", err)
			}
		}
		s.sk, s.dense = d, true
	}
	if err := s.sk.Merge(o.sk); err != nil {
		return fmt.Errorf("cannot merge link visitors: %w", err)
	}
	return nil
}

// estimate is the number of distinct visitors: exact for a list.
func (s *linkSet) estimate() uint64 {
	s.compact()
	if s.sk == nil {
		return uint64(len(s.hashes))
	}
	return s.sk.Estimate()
}

// appendTo encodes the set (compacted first).
func (s *linkSet) appendTo(dst []byte) ([]byte, error) {
	s.compact()
	if s.sk == nil {
		dst = append(dst, linkSetList)
		dst = binary.AppendUvarint(dst, uint64(len(s.hashes)))
		prev := uint64(0)
		for _, h := range s.hashes {
			dst = binary.AppendUvarint(dst, h-prev)
			prev = h
		}
		return dst, nil
	}
	dst = append(dst, linkSetSketch)
	return s.sk.AppendBinary(dst)
}

// decodeLinkSet reads an encoded set; empty is no visitor.
func decodeLinkSet(b []byte) (*linkSet, error) {
	s := &linkSet{}
	if len(b) == 0 {
		return s, nil
	}
	switch b[0] {
	case linkSetList:
		n, k := binary.Uvarint(b[1:])
		if k <= 0 || n > uint64(len(b)) {
			return nil, fmt.Errorf("%w: list count", errBadLinkSet)
		}
		b = b[1+k:]
		s.hashes = make([]uint64, 0, n)
		prev := uint64(0)
		for range n {
			d, k := binary.Uvarint(b)
			if k <= 0 {
				return nil, fmt.Errorf("%w: list", errBadLinkSet)
			}
			prev += d
			s.hashes = append(s.hashes, prev)
			b = b[k:]
		}
		if len(b) != 0 {
			return nil, fmt.Errorf("%w: trailing bytes", errBadLinkSet)
		}
	case linkSetSketch:
		s.sk = &hyperloglog.Sketch{}
		if err := s.sk.UnmarshalBinary(b[1:]); err != nil {
			return nil, fmt.Errorf("%w: %w", errBadLinkSet, err)
		}
		s.dense = len(b) > 1<<(linkPrecision-1) // a dense sketch's registers are 2^14 nibbles
	default:
		return nil, fmt.Errorf("%w: format %q", errBadLinkSet, b[0])
	}
	return s, nil
}

// size is what the decoded set costs in memory (cache accounting).
func (s *linkSet) size() int {
	n := linkSetOverheads + 8*cap(s.hashes)
	if s.sk != nil {
		if s.dense {
			n += 1 << (linkPrecision - 1)
		} else {
			n += 4 * 1024 // a sparse sketch's list and buffer: a bound, not a measure
		}
	}
	return n
}

// mixHash is splitmix64's finalizer: uniform bits from any distinct ids.
func mixHash(x uint64) uint64 {
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
