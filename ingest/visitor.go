package ingest

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
)

// visitorHash is SipHash-2-4, keyed by the daily salt, of
// (site id or link code, 0, IP as 16 bytes, user agent). SipHash is a
// keyed PRF built for short inputs: without the salt, which never leaves
// memory, the hash cannot be reversed by trying all IPv4 addresses. scratch
// is reused to build the message without allocating.
func visitorHash(salt [16]byte, scope string, ip netip.Addr, ua []byte, scratch []byte) (uint64, []byte) {
	msg := append(scratch[:0], scope...)
	msg = append(msg, 0)
	a := ip.As16()
	msg = append(msg, a[:]...)
	msg = append(msg, ua...)
	k0 := binary.LittleEndian.Uint64(salt[:8])
	k1 := binary.LittleEndian.Uint64(salt[8:])
	return sipHash24(k0, k1, msg), msg
}

// sipHash24 is the reference SipHash-2-4 over a byte string.
func sipHash24(k0, k1 uint64, m []byte) uint64 {
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
