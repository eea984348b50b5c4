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
// deltas; or 'S' and the sketch's binary form; or, for a dense sketch,
// 'D' and its 2^14 registers two to a byte (a register of 15 or more is
// 15 there and listed after: uvarint count, then uvarint index delta and
// the value), about 8 KB where the sketch's form is 16 KB. A 'D' set is
// decoded to its registers only, and merged into registers by maximum,
// as the sketch's own dense merge does: no sketch is built per row.
const (
	linkSetList      = 'L'
	linkSetSketch    = 'S'
	linkSetDense     = 'D'
	linkRegisters    = 1 << linkPrecision
	linkListMax      = 128
	linkPrecision    = 14
	linkDenseHashes  = 2048 // past this many, a sketch is built dense: n inserts into a sparse one cost n^2/328 steps
	linkSetOverheads = 64   // bytes a decoded set costs besides its hashes and registers (cache accounting)
)

var errBadLinkSet = errors.New("malformed link visitor set")

// linkSet is a decoded visitor set: hashes (while a list, or before they
// are folded into sk) and a sketch once there is one, or in place of a
// dense sketch its registers (regs; sk is then nil).
type linkSet struct {
	hashes []uint64
	sk     *hyperloglog.Sketch
	dense  bool
	regs   []uint8
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
	s.fromRegs()
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
	if o.regs != nil {
		if err := s.toRegs(); err != nil {
			return err
		}
		maxRegisters(s.regs, o.regs)
		return nil
	}
	if o.sk == nil {
		return nil
	}
	s.fromRegs()
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

// maxRegisters sets dst to the register-wise maximum of dst and src
// (equal lengths, a multiple of 8), eight registers at a time: every
// register is below 128 (at most 64 - precision + 1; decodeDense checks
// it), so (a | 0x80) - b borrows from no other byte and its high bit says
// a >= b.
func maxRegisters(dst, src []uint8) {
	const hi, lo = 0x8080808080808080, 0x0101010101010101
	for i := 0; i+8 <= len(dst) && i+8 <= len(src); i += 8 {
		a := binary.LittleEndian.Uint64(dst[i:])
		b := binary.LittleEndian.Uint64(src[i:])
		ge := (((a | hi) - b) >> 7 & lo) * 0xff
		binary.LittleEndian.PutUint64(dst[i:], a&ge|b&^ge)
	}
}

// maxRegister is the largest register value at linkPrecision.
const maxRegister = 64 - linkPrecision + 1

// toRegs turns s's sketch, if any, into dense registers (none: zeros),
// the form 'D' rows merge into.
func (s *linkSet) toRegs() error {
	if s.regs != nil {
		return nil
	}
	if s.sk == nil {
		s.regs = make([]uint8, linkRegisters)
		return nil
	}
	regs, err := denseRegisters(s.sk)
	if err != nil {
		return err
	}
	s.regs, s.sk, s.dense = regs, nil, false
	return nil
}

// fromRegs turns registers back into a dense sketch (for its estimate,
// encoding, or a merge with a sketch).
func (s *linkSet) fromRegs() {
	if s.regs == nil {
		return
	}
	blob := make([]byte, 0, denseHeader+linkRegisters)
	blob = binary.BigEndian.AppendUint32(append(blob, 2, linkPrecision, 0, 0), linkRegisters)
	blob = append(blob, s.regs...)
	sk := &hyperloglog.Sketch{}
	if err := sk.UnmarshalBinary(blob); err != nil {
		panic("BUG: dense registers do not decode: " + err.Error())
	}
	s.sk, s.dense, s.regs = sk, true, nil
}

// denseHeader is the length of a dense sketch's binary header (version
// 2, precision, 0, 0 (dense), the register count big-endian).
const denseHeader = 8

// denseRegisters is a copy of sk's 2^14 registers, made dense first if
// it is sparse; it checks the binary form it reads them from.
func denseRegisters(sk *hyperloglog.Sketch) ([]uint8, error) {
	d := newLinkSketch(true)
	if err := d.Merge(sk); err != nil {
		return nil, fmt.Errorf("cannot merge link visitors: %w", err)
	}
	blob, err := d.AppendBinary(nil)
	if err != nil {
		return nil, fmt.Errorf("cannot encode link visitors: %w", err)
	}
	if len(blob) != denseHeader+linkRegisters || blob[0] != 2 || blob[1] != linkPrecision || blob[3] != 0 {
		return nil, fmt.Errorf("%w: dense sketch of %d bytes, header % x", errBadLinkSet, len(blob), blob[:min(len(blob), denseHeader)])
	}
	return blob[denseHeader:], nil
}

// estimate is the number of distinct visitors: exact for a list. Dense
// sets are estimated from their registers (hllestimate.go), without a
// sketch built from them.
func (s *linkSet) estimate() uint64 {
	if s.regs != nil {
		insertRegisters(s.regs, s.hashes)
		s.hashes = nil
		return registersEstimate(s.regs)
	}
	s.compact()
	if s.sk == nil {
		return uint64(len(s.hashes))
	}
	if s.dense {
		if regs, err := denseRegisters(s.sk); err == nil {
			return registersEstimate(regs)
		}
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
	if s.dense {
		regs, err := denseRegisters(s.sk)
		if err != nil {
			return nil, err
		}
		return appendDense(dst, regs), nil
	}
	dst = append(dst, linkSetSketch)
	return s.sk.AppendBinary(dst)
}

// appendDense encodes registers as 'D' (above).
func appendDense(dst []byte, regs []uint8) []byte {
	dst = append(dst, linkSetDense)
	var big []int
	for i := 0; i < len(regs); i += 2 {
		lo, hi := regs[i], regs[i+1]
		if lo >= 15 {
			big = append(big, i)
		}
		if hi >= 15 {
			big = append(big, i+1)
		}
		dst = append(dst, min(lo, 15)|min(hi, 15)<<4)
	}
	dst = binary.AppendUvarint(dst, uint64(len(big)))
	prev := 0
	for _, i := range big {
		dst = binary.AppendUvarint(dst, uint64(i-prev))
		dst = append(dst, regs[i])
		prev = i
	}
	return dst
}

// decodeDense reads a 'D' set's registers (b without the 'D').
func decodeDense(b []byte) ([]uint8, error) {
	if len(b) < linkRegisters/2 {
		return nil, fmt.Errorf("%w: %d bytes of dense registers", errBadLinkSet, len(b))
	}
	regs := make([]uint8, linkRegisters)
	for i, x := range b[:linkRegisters/2] {
		regs[2*i], regs[2*i+1] = x&15, x>>4
	}
	b = b[linkRegisters/2:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > linkRegisters {
		return nil, fmt.Errorf("%w: dense escapes", errBadLinkSet)
	}
	b = b[k:]
	i := uint64(0)
	for range n {
		d, k := binary.Uvarint(b)
		if k <= 0 || len(b) < k+1 || i+d >= linkRegisters {
			return nil, fmt.Errorf("%w: dense escape", errBadLinkSet)
		}
		i += d
		if b[k] > maxRegister {
			return nil, fmt.Errorf("%w: register %d", errBadLinkSet, b[k])
		}
		regs[i] = b[k]
		b = b[k+1:]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: trailing bytes", errBadLinkSet)
	}
	return regs, nil
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
	case linkSetDense:
		regs, err := decodeDense(b[1:])
		if err != nil {
			return nil, err
		}
		s.regs = regs
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
	n := linkSetOverheads + 8*cap(s.hashes) + cap(s.regs)
	if s.sk != nil {
		if s.dense {
			n += linkRegisters // a register a byte
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
