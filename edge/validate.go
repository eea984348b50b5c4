package edge

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"

	"github.com/waymark/waymark/store"
)

// maxURLLen bounds a destination, before and after normalisation.
const maxURLLen = 2048

// destination is a validated, normalised long URL.
type destination struct {
	url    string // normalised: scheme and host lower-cased, default port dropped, the rest byte for byte
	scheme string
	host   string     // lower-cased; IPv6 literals keep their brackets
	port   string     // empty when it is the scheme's default
	canon  store.Host // the host for blocklist and self-link matching
}

// hostPort names the origin for comparisons, with the effective port.
func (d destination) hostPort() string {
	port := d.port
	if port == "" {
		port = defaultPort(d.scheme)
	}
	return strings.TrimSuffix(d.host, ".") + ":" + port
}

func defaultPort(scheme string) string {
	if scheme == "https" {
		return "443"
	}
	return "80"
}

// parseDestination validates a long URL and normalises it. Only the scheme
// and host change (lower case, punycode, no default port): path, query and
// fragment are kept byte for byte, percent-encoding included, because a
// destination that gets "fixed" on the way through is a different URL.
func parseDestination(raw string) (destination, error) {
	if raw == "" {
		return destination{}, errors.New("url is required")
	}
	if len(raw) > maxURLLen {
		return destination{}, fmt.Errorf("url is %d characters long; the limit is %d", len(raw), maxURLLen)
	}
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c <= ' ' || c == 0x7f {
			return destination{}, errors.New("url contains a space or control character; percent-encode it")
		}
	}
	if !utf8.ValidString(raw) {
		return destination{}, errors.New("url is not valid UTF-8")
	}
	colon := strings.IndexByte(raw, ':')
	if colon <= 0 || !validScheme(raw[:colon]) {
		return destination{}, errors.New("url must be absolute, starting with http:// or https://")
	}
	scheme := strings.ToLower(raw[:colon])
	if after := raw[colon+1:]; scheme != "http" && scheme != "https" &&
		(strings.IndexByte(scheme, '.') >= 0 || after != "" && after[0] >= '0' && after[0] <= '9') {
		// "example.com:8080/x" is a host and port, not a scheme.
		return destination{}, errors.New("url must be absolute, starting with http:// or https://")
	}
	if scheme != "http" && scheme != "https" {
		return destination{}, fmt.Errorf("url scheme %q is not allowed; use http or https", scheme)
	}
	rest, ok := strings.CutPrefix(raw[colon+1:], "//")
	if !ok {
		return destination{}, fmt.Errorf("url must be absolute: expected %s:// followed by a host", scheme)
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	if strings.IndexByte(authority, '@') >= 0 {
		return destination{}, errors.New("url must not contain user info (user@ or user:password@ before the host)")
	}
	hostPart, portPart, err := splitHostPort(authority)
	if err != nil {
		return destination{}, err
	}
	host, canon, err := normalizeHost(hostPart)
	if err != nil {
		return destination{}, err
	}
	port, err := normalizePort(portPart, scheme)
	if err != nil {
		return destination{}, err
	}
	var b strings.Builder
	b.Grow(len(raw) + 8)
	b.WriteString(scheme)
	b.WriteString("://")
	b.WriteString(host)
	if port != "" {
		b.WriteByte(':')
		b.WriteString(port)
	}
	b.WriteString(tail)
	d := destination{url: b.String(), scheme: scheme, host: host, port: port, canon: canon}
	if len(d.url) > maxURLLen {
		return destination{}, fmt.Errorf("url is %d characters long once its host is encoded; the limit is %d", len(d.url), maxURLLen)
	}
	return d, nil
}

// validScheme reports whether s has the RFC 3986 scheme syntax.
func validScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20
		switch {
		case c >= 'a' && c <= 'z':
		case i > 0 && (s[i] >= '0' && s[i] <= '9' || s[i] == '+' || s[i] == '-' || s[i] == '.'):
		default:
			return false
		}
	}
	return true
}

func splitHostPort(authority string) (host, port string, err error) {
	if authority == "" {
		return "", "", errors.New("url has no host")
	}
	if authority[0] == '[' {
		end := strings.IndexByte(authority, ']')
		if end < 0 {
			return "", "", errors.New("url has an IPv6 host without a closing ]")
		}
		host, after := authority[:end+1], authority[end+1:]
		if after == "" {
			return host, "", nil
		}
		if after[0] != ':' {
			return "", "", errors.New("url has text after its IPv6 host; expected :port")
		}
		return host, after[1:], nil
	}
	i := strings.IndexByte(authority, ':')
	if i < 0 {
		return authority, "", nil
	}
	if strings.IndexByte(authority[i+1:], ':') >= 0 {
		return "", "", errors.New("url has an IPv6 host without brackets; write it as [address]")
	}
	return authority[:i], authority[i+1:], nil
}

// normalizeHost returns the host as the stored URL spells it and its
// canonical form (store.ParseHost's rules). A name is lower case and
// punycode; an IPv4 address in any form a browser reads (2130706433,
// 0x7f.1, 0177.0.0.1) is written dotted, so every spelling of one address
// is one URL; an IPv6 address is written compressed, in brackets.
func normalizeHost(host string) (string, store.Host, error) {
	if host == "" {
		return "", store.Host{}, errors.New("url has no host")
	}
	if host[0] == '[' {
		inner := host[1 : len(host)-1]
		if strings.IndexByte(inner, '%') >= 0 {
			return "", store.Host{}, errors.New("url has an IPv6 zone identifier, which is not allowed")
		}
		addr, err := netip.ParseAddr(inner)
		if err != nil || !addr.Is6() {
			return "", store.Host{}, fmt.Errorf("url host %q is not a valid IPv6 address", host)
		}
		return "[" + addr.String() + "]", store.Host{Addr: store.CanonicalAddr(addr)}, nil
	}
	for i := 0; i < len(host); i++ {
		if host[i] >= utf8.RuneSelf {
			ascii, err := idna.Lookup.ToASCII(host)
			if err != nil {
				return "", store.Host{}, fmt.Errorf("url host %q is not a valid internationalised domain name", host)
			}
			host = ascii
			break
		}
	}
	host = strings.ToLower(host)
	if err := checkHostname(host); err != nil {
		return "", store.Host{}, err
	}
	if store.EndsInNumber(host) {
		addr, err := store.ParseIPv4Host(host)
		if err != nil {
			return "", store.Host{}, fmt.Errorf("url host %q is not a valid IPv4 address", host)
		}
		return addr.String(), store.Host{Addr: addr}, nil
	}
	return host, store.Host{Name: strings.TrimRight(host, ".")}, nil
}

// checkHostname checks a lower-case ASCII host: DNS labels (a number as
// the last label makes it an IPv4 address, checked by the caller).
func checkHostname(host string) error {
	name := strings.TrimSuffix(host, ".")
	if name == "" || len(name) > 253 {
		return fmt.Errorf("url host %q is not a valid host name", host)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return fmt.Errorf("url host %q contains %q, which a host name cannot contain", host, c)
		}
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("url host %q is not a valid host name", host)
		}
	}
	return nil
}

func normalizePort(port, scheme string) (string, error) {
	if port == "" {
		return "", nil
	}
	if len(port) > 5 || strings.Trim(port, "0123456789") != "" {
		return "", fmt.Errorf("url port %q is not a number from 1 to 65535", port)
	}
	n, _ := strconv.Atoi(port)
	if n < 1 || n > 65535 {
		return "", fmt.Errorf("url port %q is not a number from 1 to 65535", port)
	}
	p := strconv.Itoa(n)
	if p == defaultPort(scheme) {
		return "", nil
	}
	return p, nil
}

// Alias rules.
const (
	minAliasLen = 3
	maxAliasLen = 32
)

// reservedAliases are paths the service uses or may use; compared in lower
// case. First path segments of Config.Routes are added at New.
var reservedAliases = []string{
	"api", "v1", "v2", "admin", "login", "logout", "signup", "register",
	"account", "settings", "static", "assets", "health", "healthz", "readyz",
	"livez", "metrics", "s.js", "robots.txt", "favicon.ico", "dashboard", "share",
	"problems", "docs", "help", "support", "status", "stats", "about",
	"auth", "oauth", "sites", "links", "event", "events", "www", "app",
	"sitemap.xml", "security.txt", "humans.txt", "waymark",
	"export", // GET /v1/links/export would shadow the link's API path
}

// validCodeSyntax reports whether b could be a code: a generated code or an
// alias, both of which match ^[A-Za-z0-9_-]{3,32}$.
func validCodeSyntax[T string | []byte](b T) bool {
	if len(b) < minAliasLen || len(b) > maxAliasLen {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// aliasError says why an alias cannot be used; unavailable tells a syntax
// error (400) from an alias that is well-formed but not free (409).
type aliasError struct {
	unavailable bool
	msg         string
}

func (e *aliasError) Error() string { return e.msg }

// checkAlias applies the alias rules that need no store lookup.
func (s *Server) checkAlias(alias string) error {
	if !validCodeSyntax(alias) {
		return &aliasError{msg: fmt.Sprintf("alias must be %d to %d characters of A-Z, a-z, 0-9, '_' and '-'", minAliasLen, maxAliasLen)}
	}
	if _, ok := s.reserved[strings.ToLower(alias)]; ok {
		return &aliasError{unavailable: true, msg: fmt.Sprintf("alias %q is reserved", alias)}
	}
	// Generated codes are exactly 7 base62 characters. An alias of that
	// shape could be handed out later as a generated code, so it is refused.
	if _, err := store.ParseCode([]byte(alias)); err == nil {
		return &aliasError{unavailable: true, msg: fmt.Sprintf("alias %q has the shape of a generated code (%d letters and digits); add '-' or '_' or choose another length", alias, store.CodeLen)}
	}
	return nil
}
