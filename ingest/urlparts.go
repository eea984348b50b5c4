package ingest

import (
	"bytes"
	"net/url"
	"strings"
)

// referrerHost returns the host of a referrer URL: no scheme, user info,
// port, path or query. It is a sub-slice of ref; non-URLs give nil.
func referrerHost(ref []byte) []byte {
	i := bytes.Index(ref, []byte("://"))
	if i <= 0 {
		return nil
	}
	rest := ref[i+3:]
	if end := bytes.IndexAny(rest, "/?#"); end >= 0 {
		rest = rest[:end]
	}
	if at := bytes.LastIndexByte(rest, '@'); at >= 0 {
		rest = rest[at+1:]
	}
	if len(rest) > 0 && rest[0] == '[' { // IPv6 literal
		if end := bytes.IndexByte(rest, ']'); end > 0 {
			return rest[1:end]
		}
		return nil
	}
	if colon := bytes.IndexByte(rest, ':'); colon >= 0 {
		rest = rest[:colon]
	}
	if len(rest) > 4 && bytes.EqualFold(rest[:4], []byte("www.")) {
		rest = rest[4:]
	}
	for _, c := range rest {
		if c <= ' ' || c == '"' || c == '<' || c == '>' || c == '\\' || c == 0x7f {
			return nil
		}
	}
	return rest
}

// normalizeDomain lowercases a site domain and drops "www." and spaces, as
// Plausible does, so "WWW.Example.com " and "example.com" are one site.
func normalizeDomain(d string) string {
	d = strings.ToLower(strings.TrimSpace(d))
	d = strings.TrimSuffix(d, ".")
	return strings.TrimPrefix(d, "www.")
}

// pageURL is what a site event keeps of the page URL.
type pageURL struct {
	host string // lowercased, without www.
	path string // decoded path (plus "#fragment" in hash mode), never the query
	utm  [5]string
}

// parsePageURL splits a tracker's page URL. It fails for anything that is
// not an absolute URL with a host, and for data: URLs.
func parsePageURL(raw string, hashMode bool) (pageURL, bool) {
	var pu pageURL
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || strings.EqualFold(u.Scheme, "data") {
		return pu, false
	}
	pu.host = normalizeDomain(u.Hostname())
	if u.Opaque != "" {
		return pu, false
	}
	pu.path = u.Path
	if pu.path == "" {
		pu.path = "/"
	}
	if hashMode && u.Fragment != "" {
		pu.path += "#" + u.Fragment
	}
	if u.RawQuery != "" {
		q := u.Query()
		for i, name := range utmNames {
			v := q.Get(name)
			pu.utm[i] = v[:min(len(v), MaxUTMLen)]
		}
	}
	if len(pu.path) > MaxPathLen {
		return pu, false
	}
	return pu, true
}
