package store

import (
	"encoding/binary"
	"math/bits"
)

// sipHash24 is SipHash-2-4 of one 8-byte word, the pseudo-random function
// inside the Feistel rounds. It is written out here so the permutation
// allocates nothing and needs no dependency.
func sipHash24(k0, k1, m uint64) uint64 {
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
	v3 ^= m
	round()
	round()
	v0 ^= m
	b := uint64(8) << 56
	v3 ^= b
	round()
	round()
	v0 ^= b
	v2 ^= 0xff
	round()
	round()
	round()
	round()
	return v0 ^ v1 ^ v2 ^ v3
}

func sipKey(key []byte) (uint64, uint64) {
	var k [16]byte
	copy(k[:], key)
	return binary.LittleEndian.Uint64(k[:8]), binary.LittleEndian.Uint64(k[8:])
}
