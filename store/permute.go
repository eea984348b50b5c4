package store

import (
	"errors"
	"fmt"
)

// KeySize is the size of the cluster secret that keys the code permutation.
const KeySize = 16

const (
	feistelHalfBits = 21 // 2^42 > 62^7, so two 21-bit halves cover the space
	feistelHalfMask = 1<<feistelHalfBits - 1
	feistelRounds   = 8
)

// Permuter is a keyed bijection on [0, IDSpace). It is a balanced Feistel
// network over 42 bits with SipHash-2-4 as the round function; values that
// land outside the space are walked again (cycle walking) until they land
// inside, which keeps the map a bijection on exactly IDSpace values. Since
// 62^7/2^42 ≈ 0.8, the expected walk is 1.25 passes.
type Permuter struct {
	k0, k1 uint64
}

// NewPermuter returns the permutation keyed by key (KeySize bytes).
func NewPermuter(key []byte) (*Permuter, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("cannot build permutation: key is %d bytes; want %d", len(key), KeySize)
	}
	k0, k1 := sipKey(key)
	if k0 == 0 && k1 == 0 {
		return nil, errors.New("cannot build permutation: key is all zero")
	}
	return &Permuter{k0: k0, k1: k1}, nil
}

func (p *Permuter) round(r int, half uint64) uint64 {
	return sipHash24(p.k0, p.k1, uint64(r)<<32|half) & feistelHalfMask
}

func (p *Permuter) forward(x uint64) uint64 {
	l, r := x>>feistelHalfBits, x&feistelHalfMask
	for i := 0; i < feistelRounds; i++ {
		l, r = r, l^p.round(i, r)
	}
	return l<<feistelHalfBits | r
}

func (p *Permuter) backward(x uint64) uint64 {
	l, r := x>>feistelHalfBits, x&feistelHalfMask
	for i := feistelRounds - 1; i >= 0; i-- {
		l, r = r^p.round(i, l), l
	}
	return l<<feistelHalfBits | r
}

// Permute maps an ID to its permuted value. id must be < IDSpace.
func (p *Permuter) Permute(id uint64) uint64 {
	x := p.forward(id)
	for x >= IDSpace {
		x = p.forward(x)
	}
	return x
}

// Unpermute is the inverse of Permute.
func (p *Permuter) Unpermute(v uint64) uint64 {
	x := p.backward(v)
	for x >= IDSpace {
		x = p.backward(x)
	}
	return x
}

// AppendCodeFor appends the generated code for id to dst.
func (p *Permuter) AppendCodeFor(dst []byte, id uint64) []byte {
	return AppendCode(dst, p.Permute(id))
}

// IDOf decodes a generated code back to its ID.
func (p *Permuter) IDOf(code []byte) (uint64, error) {
	v, err := ParseCode(code)
	if err != nil {
		return 0, err
	}
	return p.Unpermute(v), nil
}
