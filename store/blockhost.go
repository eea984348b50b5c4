package store

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// Canonical host forms, shared by the blocklist's entries and the
// destinations checked against it, so that one host has one spelling:
//
//   - a name is IDNA-processed (UTS #46 lookup rules, to punycode), lower
//     case, without trailing dots;
//   - an IPv4 address is read the way browsers read a host (WHATWG URL
//     "IPv4 parser": 1 to 4 parts, each decimal, 0x hex or 0-led octal,
//     the last filling the remaining bytes), so 2130706433, 0x7f.1 and
//     0177.0.0.1 are all 127.0.0.1;
//   - an IPv6 address goes through net/netip (compressed forms, case),
//     and an IPv4-mapped one (::ffff:10.0.0.1) is its IPv4 address.

// maxHostLen bounds a host name (DNS: 253 characters without the dot).
const maxHostLen = 253

// CanonicalName processes a host name: IDNA to ASCII when it holds
// non-ASCII, lower case, trailing dots stripped; each label 1 to 63
// characters of a-z, 0-9, '-' and '_' (feeds carry underscores, which
// DNS allows outside host names).
func CanonicalName(host string) (string, error) {
	if !utf8.ValidString(host) {
		return "", errors.New("host is not valid UTF-8")
	}
	for i := 0; i < len(host); i++ {
		if host[i] >= utf8.RuneSelf {
			ascii, err := idna.Lookup.ToASCII(host)
			if err != nil {
				return "", fmt.Errorf("host %q is not a valid internationalised domain name", host)
			}
			host = ascii
			break
		}
	}
	name := strings.ToLower(strings.TrimRight(host, "."))
	if name == "" || len(name) > maxHostLen {
		return "", fmt.Errorf("host %q is not a valid host name", host)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return "", fmt.Errorf("host %q contains %q, which a host name cannot contain", host, c)
		}
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 {
			return "", fmt.Errorf("host %q is not a valid host name", host)
		}
	}
	return name, nil
}

// EndsInNumber reports whether a lower-case ASCII host's last label
// (ignoring one trailing dot) is a number to a browser, decimal or 0x hex:
// such a host is an IPv4 address or invalid, never a name.
func EndsInNumber(host string) bool {
	h := strings.TrimSuffix(host, ".")
	last := h[strings.LastIndexByte(h, '.')+1:]
	if last == "" {
		return false
	}
	if x, ok := strings.CutPrefix(last, "0x"); ok {
		return strings.Trim(x, "0123456789abcdef") == ""
	}
	return strings.Trim(last, "0123456789") == ""
}

// ParseIPv4Host reads a lower-case ASCII host that EndsInNumber as the
// WHATWG URL standard's IPv4 parser does.
func ParseIPv4Host(host string) (netip.Addr, error) {
	bad := fmt.Errorf("host %q is not a valid IPv4 address", host)
	h := strings.TrimSuffix(host, ".")
	parts := strings.Split(h, ".")
	if len(parts) > 4 {
		return netip.Addr{}, bad
	}
	var nums [4]uint64
	for i, p := range parts {
		n, ok := ipv4Number(p)
		if !ok {
			return netip.Addr{}, bad
		}
		nums[i] = n
	}
	last := len(parts) - 1
	var v uint64
	for i := 0; i < last; i++ {
		if nums[i] > 255 {
			return netip.Addr{}, bad
		}
		v = v<<8 | nums[i]
	}
	room := uint(8 * (4 - last)) // bits the last part fills
	if nums[last] >= 1<<room {
		return netip.Addr{}, bad
	}
	v = v<<room | nums[last]
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), nil
}

// ipv4Number parses one part: "0x" hex (empty digits mean 0), "0"-led
// octal, or decimal. Values past 2^32 are refused without overflowing.
func ipv4Number(p string) (uint64, bool) {
	if p == "" {
		return 0, false
	}
	base := uint64(10)
	switch {
	case strings.HasPrefix(p, "0x"):
		base, p = 16, p[2:]
	case len(p) > 1 && p[0] == '0':
		base, p = 8, p[1:]
	}
	var n uint64
	for i := 0; i < len(p); i++ {
		c := p[i]
		var d uint64
		switch {
		case c >= '0' && c <= '9':
			d = uint64(c - '0')
		case c >= 'a' && c <= 'f':
			d = uint64(c-'a') + 10
		default:
			return 0, false
		}
		if d >= base {
			return 0, false
		}
		if n = n*base + d; n > 1<<32 {
			return 0, false
		}
	}
	return n, true
}

// CanonicalAddr unmaps an IPv4-mapped IPv6 address and drops a zone.
func CanonicalAddr(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }

// Host is a canonical host: a name or an address, never both.
type Host struct {
	Name string     // canonical name, "" for an address
	Addr netip.Addr // canonical address (IPv4 when mapped), invalid for a name
}

// IsAddr reports whether the host is an IP literal.
func (h Host) IsAddr() bool { return h.Addr.IsValid() }

func (h Host) String() string {
	if h.IsAddr() {
		return h.Addr.String()
	}
	return h.Name
}

// ParseHost reads a host as written in a URL or a feed: a name, an IPv4
// address in any form a browser reads, or an IPv6 address with or
// without brackets.
func ParseHost(s string) (Host, error) {
	if s == "" {
		return Host{}, errors.New("host is empty")
	}
	if len(s) > 2*maxHostLen {
		return Host{}, fmt.Errorf("host is %d bytes long; the limit is %d", len(s), maxHostLen)
	}
	if s[0] == '[' || strings.IndexByte(s, ':') >= 0 {
		inner := s
		if s[0] == '[' {
			if len(s) < 2 || s[len(s)-1] != ']' {
				return Host{}, fmt.Errorf("host %q has an IPv6 address without a closing ]", s)
			}
			inner = s[1 : len(s)-1]
		}
		if strings.IndexByte(inner, '%') >= 0 {
			return Host{}, fmt.Errorf("host %q has an IPv6 zone, which is not allowed", s)
		}
		a, err := netip.ParseAddr(inner)
		if err != nil || !a.Is6() {
			return Host{}, fmt.Errorf("host %q is not a valid IPv6 address", s)
		}
		return Host{Addr: CanonicalAddr(a)}, nil
	}
	name, err := CanonicalName(s)
	if err != nil {
		return Host{}, err
	}
	if EndsInNumber(name) {
		a, err := ParseIPv4Host(name)
		if err != nil {
			return Host{}, err
		}
		return Host{Addr: a}, nil
	}
	return Host{Name: name}, nil
}
