package edge

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"unsafe"

	"github.com/waymark/waymark/store"
)

// Destinations are checked against the store's replicated blocklist twice:
// at create and edit (block and shortener entries, 422
// destination-blocked), and on every redirect (block entries only), so a
// host blocked later stops existing links everywhere without rewriting
// them. The redirect-time check reads the store's snapshot (one atomic
// load) and caches its verdict in the cache entry for that snapshot's
// generation, so a hit pays two atomic loads and allocates nothing.

// pageBlockedDest answers a link whose destination is on the blocklist.
// It names no host: it is shared by every such link, so it costs nothing
// per request.
var pageBlockedDest = page("Warning: this link has been blocked",
	`<div class="warning"><p>This short link leads to a site on this service's blocklist (for example phishing or malware).</p>`+
		`<p>Waymark has blocked it to protect you. There is no way to continue from this page.</p></div>`)

// destBlocked reports whether e's destination is on a block entry of the
// current blocklist. It does not allocate. The fast path reads the verdict
// cached in entry.blockSeen (generation<<1 | blocked; 0 = not checked;
// generations are never 0); serveCode has it written out.
func (s *Server) destBlocked(e *entry) bool {
	if v := e.blockSeen.Load(); v>>1 == s.st.BlocklistGen() {
		return v&1 == 1
	}
	return s.destBlockedSlow(e)
}

// destBlockedSlow matches e against the current snapshot and caches the
// verdict under the snapshot's own generation.
func (s *Server) destBlockedSlow(e *entry) bool {
	bl := s.st.Blocklist()
	gen := bl.Gen()
	blocked := locationBlocked(bl, e.location)
	v := gen << 1
	if blocked {
		v |= 1
	}
	e.blockSeen.Store(v)
	return blocked
}

// locationBlocked matches a stored destination's host. Stored URLs are
// normalised at create (lower case, punycode, dotted IPv4, bracketed
// IPv6), so the host is a substring of the URL and needs no copy.
func locationBlocked(bl *store.Blocklist, loc []byte) bool {
	i := bytes.Index(loc, schemeSep)
	if i < 0 {
		return false
	}
	rest := loc[i+len(schemeSep):]
	if len(rest) > 0 && rest[0] == '[' {
		end := bytes.IndexByte(rest, ']')
		if end < 0 {
			return false
		}
		a, err := netip.ParseAddr(bytesString(rest[1:end]))
		return err == nil && bl.BlocksAddr(a)
	}
	end := bytes.IndexAny(rest, ":/?#")
	if end < 0 {
		end = len(rest)
	}
	host := bytesString(bytes.TrimRight(rest[:end], "."))
	if host == "" {
		return false
	}
	if store.EndsInNumber(host) {
		a, err := netip.ParseAddr(host)
		return err == nil && bl.BlocksAddr(a)
	}
	return bl.BlocksName(host)
}

var schemeSep = []byte("://")

// bytesString views b as a string; b must not change while it is used.
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// blockedDetail explains why a destination was refused.
func blockedDetail(host string, e store.BlockEntry) string {
	what := "on this service's blocklist"
	if e.Kind == store.BlockKindShortener {
		what = "a URL shortener; link to the final destination instead (a short link to a short link hides where it goes and can loop)"
	}
	match := "entry " + e.Value
	if e.Value == host {
		match = "an entry for it"
	}
	detail := fmt.Sprintf("links to %s are not allowed: it is %s (matched %s", host, what, match)
	if e.Reason != "" && !e.Builtin {
		detail += ", reason: " + e.Reason
	}
	return detail + ")"
}

// ownAddrs collects the addresses the service answers on, refused as
// destinations on any port: the public URL's host when it is an IP
// literal, and the hosts of the listen addresses; an unspecified listen address (0.0.0.0,
// [::]) stands for every address of this machine's interfaces.
func ownAddrs(publicHost store.Host, listen []string) (map[netip.Addr]struct{}, map[string]struct{}) {
	addrs := map[netip.Addr]struct{}{}
	names := map[string]struct{}{}
	add := func(h store.Host) {
		if h.IsAddr() {
			addrs[h.Addr] = struct{}{}
		} else if h.Name != "" {
			names[h.Name] = struct{}{}
		}
	}
	if publicHost.IsAddr() { // a name is matched with its port (selfReason)
		add(publicHost)
	}
	for _, l := range listen {
		host, _, err := net.SplitHostPort(l)
		if err != nil {
			host = l
		}
		if host == "" {
			host = "0.0.0.0"
		}
		h, err := store.ParseHost(host)
		if err != nil {
			continue
		}
		if h.IsAddr() && h.Addr.IsUnspecified() {
			for _, a := range interfaceAddrs() {
				addrs[a] = struct{}{}
			}
			continue
		}
		add(h)
	}
	return addrs, names
}

func interfaceAddrs() []netip.Addr {
	ifs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, ia := range ifs {
		if p, err := netip.ParsePrefix(ia.String()); err == nil {
			out = append(out, store.CanonicalAddr(p.Addr()))
		}
	}
	return out
}

// selfReason says why a destination points back at this service, or ""
// when it does not: localhost names, loopback and unspecified addresses in
// any spelling, the public URL's host, and the node's own addresses.
func (s *Server) selfReason(d destination) string {
	h := d.canon
	if h.IsAddr() {
		switch {
		case h.Addr.IsLoopback():
			return "a loopback address (" + h.Addr.String() + ")"
		case h.Addr.IsUnspecified():
			return "an unspecified address (" + h.Addr.String() + "), which reaches this machine"
		}
		if _, ok := s.ownAddrs[h.Addr]; ok {
			return "an address of this service (" + h.Addr.String() + ")"
		}
		return s.clusterReason(h)
	}
	if h.Name == "localhost" || strings.HasSuffix(h.Name, ".localhost") {
		return "localhost"
	}
	if h.Name == s.ownHost && (s.ownOrigin == "" || d.hostPort() == s.ownOrigin) {
		return "this service's own host"
	}
	if _, ok := s.ownNames[h.Name]; ok {
		return "a listen address of this service (" + h.Name + ")"
	}
	if _, ok := s.st.ApprovedDomains().Owner([]byte(h.Name)); ok {
		return "a custom domain of this service (" + h.Name + ")"
	}
	return s.clusterReason(h)
}

// clusterReason reports a host that is another node of the cluster: a
// link there would loop through that node.
func (s *Server) clusterReason(h store.Host) string {
	if s.cfg.ClusterAddrs == nil {
		return ""
	}
	for _, a := range s.cfg.ClusterAddrs() {
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			continue
		}
		nh, err := store.ParseHost(host)
		if err == nil && nh == h && !(nh.IsAddr() && nh.Addr.IsUnspecified()) {
			return "the address of another node of this service (" + h.String() + ")"
		}
	}
	return ""
}
