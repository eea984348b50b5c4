package store

import (
	"encoding/binary"
	"math/bits"
)

// SipHash24 is the reference SipHash-2-4 of m under the key (k0, k1). It
// is the round function of the code permutation and the visitor hash of
// ingest; written out here so neither allocates nor needs a dependency.
func SipHash24(k0, k1 uint64, m []byte) uint64 {
	v0 := k0 ^ 0x736f6d6570736575
	v1 := k1 ^ 0x646f72616e646f6d
	v2 := k0 ^ 0x6c7967656e657261
	v3 := k1 ^ 0x7465646279746573
	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13)
		v1 ^= v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16)
		v3 ^= v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21)
		v3 ^= v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17)
		v1 ^= v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	n := len(m)
	for len(m) >= 8 {
		w := binary.LittleEndian.Uint64(m)
		v3 ^= w
		round()
		round()
		v0 ^= w
		m = m[8:]
	}
	last := uint64(n) << 56
	for i, c := range m {
		last |= uint64(c) << (8 * i)
	}
	v3 ^= last
	round()
	round()
	v0 ^= last
	v2 ^= 0xff
	round()
	round()
	round()
	round()
	return v0 ^ v1 ^ v2 ^ v3
}

// sipHash24 is SipHash24 of one 8-byte little-endian word.
func sipHash24(k0, k1, w uint64) uint64 {
	var m [8]byte
	binary.LittleEndian.PutUint64(m[:], w)
	return SipHash24(k0, k1, m[:])
}

func sipKey(key []byte) (uint64, uint64) {
	var k [16]byte
	copy(k[:], key)
	return binary.LittleEndian.Uint64(k[:8]), binary.LittleEndian.Uint64(k[8:])
}
