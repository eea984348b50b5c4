package ingest

import (
	"bytes"
	"net/netip"
	"unsafe"

	"github.com/valyala/fasthttp"
)

// maxUALen bounds the user agent kept for parsing and hashing.
const maxUALen = 512

// pending is an event between capture and the writer: the Event fields
// known at the edge plus the raw inputs of enrichment (IP, user agent,
// proxy country), which never reach the disk. Pendings are pooled.
//
// A pending comes back from the pool cold (the writer, on another core,
// used it last), so CaptureClick writes only the fields at the top, a few
// cache lines together, and the writer turns them into ev (see
// fillClick).
type pending struct {
	// buf backs the string fields of click events (see viewString), so a
	// click is captured without allocating.
	buf     []byte
	ua      []byte
	clickAt int64            // Unix ms
	spans   [clickSpans]span // pieces of buf: code, referrer host, raw query
	country [2]byte          // from a trusted proxy header; zero if none
	click   bool             // a click captured by CaptureClick; ev is filled by fillClick
	ruled   bool             // the click's link has redirect rules; rule says which it followed
	rule    uint8            // Event.Rule
	ip      netip.Addr
	uaHash  uint64 // ua's hash for the enricher's cache, set by the writer's prepare

	ev Event
}

// The strings a click keeps, in pending.spans.
const (
	spanCode = iota
	spanReferrer
	spanQuery // the raw query string; its UTM values are read on the writer
	clickSpans
)

// maxClickQuery bounds the query string a click keeps until the writer
// has read its UTM values.
const maxClickQuery = 2048

func (pe *pending) reset() {
	props := pe.ev.Props[:0]
	clear(props[:cap(props)]) // drop references to request strings
	pe.ev = Event{Props: props}
	pe.click, pe.clickAt = false, 0
	pe.ruled, pe.rule = false, 0
	pe.ip = netip.Addr{}
	pe.ua = pe.ua[:0]
	pe.country = [2]byte{}
	pe.buf = pe.buf[:0]
}

// span is a piece of pending.buf, which never holds more than a code, a
// host and five UTM values (under 64 KiB).
type span struct{ off, n uint16 }

func (pe *pending) add(b []byte, limit int) span {
	b = b[:min(len(b), limit)]
	s := span{uint16(len(pe.buf)), uint16(len(b))}
	pe.buf = append(pe.buf, b...)
	return s
}

// viewString returns the bytes of s as a string without copying. The
// string aliases pe.buf, which is neither appended to nor reused until the
// writer has encoded the event and released pe.
func (pe *pending) viewString(s span) string {
	if s.n == 0 {
		return ""
	}
	return unsafe.String(&pe.buf[s.off], int(s.n))
}

// fillClick builds the event of a captured click, on the writer.
func (pe *pending) fillClick() {
	if !pe.click {
		return
	}
	ev := &pe.ev
	ev.Kind = KindClick
	ev.Time = pe.clickAt
	ev.Code = pe.viewString(pe.spans[spanCode])
	ev.ReferrerHost = pe.viewString(pe.spans[spanReferrer])
	if pe.ruled {
		ev.Flags |= FlagRules
		ev.Rule = pe.rule
	}
	if q := pe.viewString(pe.spans[spanQuery]); q != "" {
		// Decoded values go after the raw bytes in pe.buf; should it grow,
		// the views taken so far keep the old array alive.
		var utm [len(utmNames)]string
		queryUTM(q, &utm, &pe.buf)
		ev.UTMSource, ev.UTMMedium, ev.UTMCampaign, ev.UTMTerm, ev.UTMContent = utm[0], utm[1], utm[2], utm[3], utm[4]
	}
}

// CaptureClick records a click on code from a redirect request. It never
// blocks: it copies what it needs from ctx (the request may be reused the
// moment it returns) and queues the event, or drops and counts it when the
// queue is full. Enrichment and hashing happen later on the writer.
func (p *Pipeline) CaptureClick(ctx *fasthttp.RequestCtx, code []byte) {
	if p.closed.Load() {
		p.m.drop(DropClosed)
		return
	}
	pe := p.pool.Get().(*pending)
	p.captureInto(pe, ctx, code)
	p.enqueue(pe)
}

// CaptureRuleClick is CaptureClick for a link with redirect rules: the
// event records the rule the redirect followed (rule index + 1, or 0 for
// the link's own URL).
func (p *Pipeline) CaptureRuleClick(ctx *fasthttp.RequestCtx, code []byte, rule uint8) {
	if p.closed.Load() {
		p.m.drop(DropClosed)
		return
	}
	pe := p.pool.Get().(*pending)
	p.captureInto(pe, ctx, code)
	pe.ruled, pe.rule = true, rule
	p.enqueue(pe)
}

// captureInto copies a click from a redirect request into pe.
func (p *Pipeline) captureInto(pe *pending, ctx *fasthttp.RequestCtx, code []byte) {
	if pe.buf == nil {
		pe.buf = make([]byte, 0, 512)
	}
	pe.click = true
	pe.clickAt = p.now().UnixMilli()
	h := &ctx.Request.Header
	pe.spans[spanCode] = pe.add(code, MaxCodeLen)
	pe.spans[spanReferrer] = pe.addHost(referrerHost(h.Referer()))
	pe.spans[spanQuery] = pe.add(ctx.URI().QueryString(), maxClickQuery)
	ua := h.UserAgent()
	pe.ua = append(pe.ua[:0], ua[:min(len(ua), maxUALen)]...)
	pe.ip, pe.country = p.clientOf(ctx)
}

// hdrXForwardedFor is in fasthttp's canonical form, so a lookup need not
// normalise it first.
var hdrXForwardedFor = []byte("X-Forwarded-For")

var utmNames = [5]string{"utm_source", "utm_medium", "utm_campaign", "utm_term", "utm_content"}

// addHost appends a host lowercased, so equal hosts compare equal.
func (pe *pending) addHost(host []byte) span {
	host = host[:min(len(host), MaxHostLen)]
	s := span{uint16(len(pe.buf)), uint16(len(host))}
	for _, c := range host {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		pe.buf = append(pe.buf, c)
	}
	return s
}

// clientOf returns the client address and the proxy's country for a
// request. X-Forwarded-For and the country header are believed only when
// the direct peer is a trusted proxy.
func (p *Pipeline) clientOf(ctx *fasthttp.RequestCtx) (netip.Addr, [2]byte) {
	peer, _ := netip.AddrFromSlice(ctx.RemoteIP())
	peer = peer.Unmap()
	var country [2]byte
	if !p.trusted(peer) {
		return peer, country
	}
	h := &ctx.Request.Header
	client := peer
	if xff := h.PeekCanonical(hdrXForwardedFor); len(xff) > 0 {
		client = p.clientFromXFF(xff, peer)
	}
	if p.countryKey != nil {
		country = countryCode(h.PeekCanonical(p.countryKey))
	} else if p.cfg.CountryHeader != "" {
		country = countryCode(h.Peek(p.cfg.CountryHeader))
	}
	return client, country
}

func (p *Pipeline) trusted(a netip.Addr) bool {
	for _, pfx := range p.cfg.TrustedProxies {
		if pfx.Contains(a) {
			return true
		}
	}
	return false
}

// clientFromXFF walks X-Forwarded-For from the right, skipping trusted
// proxies; the first untrusted address is the client. Entries left of it
// are client-supplied and ignored.
func (p *Pipeline) clientFromXFF(xff []byte, peer netip.Addr) netip.Addr {
	client := peer
	for len(xff) > 0 {
		i := bytes.LastIndexByte(xff, ',')
		part := bytes.TrimSpace(xff[i+1:])
		if i < 0 {
			xff = nil
		} else {
			xff = xff[:i]
		}
		a, err := netip.ParseAddr(unsafe.String(unsafe.SliceData(part), len(part)))
		if err != nil {
			return client
		}
		client = a.Unmap()
		if !p.trusted(client) {
			return client
		}
	}
	return client
}

// canonicalHeaderKey returns name as fasthttp stores it in a request, so
// lookups can skip normalising it, or nil when fasthttp treats the name
// specially (then Peek must be used).
func canonicalHeaderKey(name string) []byte {
	var h fasthttp.RequestHeader
	h.Set(name, "x")
	for k := range h.All() {
		if bytes.EqualFold(k, []byte(name)) && string(h.PeekCanonical(k)) == "x" {
			return bytes.Clone(k)
		}
	}
	return nil
}

// countryCode accepts a two-letter code; "XX" (unknown) and "T1" (Tor)
// as sent by Cloudflare, and "ZZ" (unknown in some databases), mean no
// country, as in Plausible.
func countryCode(b []byte) [2]byte {
	var c [2]byte
	if len(b) != 2 {
		return c
	}
	for i := range 2 {
		x := b[i]
		if 'a' <= x && x <= 'z' {
			x -= 'a' - 'A'
		}
		if x < 'A' || x > 'Z' {
			return [2]byte{}
		}
		c[i] = x
	}
	if c == [2]byte{'X', 'X'} || c == [2]byte{'Z', 'Z'} {
		return [2]byte{}
	}
	return c
}
