package ingest

import (
	"encoding/binary"
	"net/netip"

	"github.com/waymark/waymark/store"
)

// visitorHash is SipHash-2-4, keyed by the daily salt, of
// (site id or link code, 0, IP as 16 bytes, user agent). SipHash is a
// keyed PRF built for short inputs: without the salt, which lives only
// in memory and the 0600 salt file and is gone once its day is older
// than yesterday, the hash cannot be reversed by trying all IPv4
// addresses. scratch
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

// sipHash24 is SipHash-2-4 over a byte string; one implementation serves
// the code permutation and the visitor hash.
func sipHash24(k0, k1 uint64, m []byte) uint64 { return store.SipHash24(k0, k1, m) }
