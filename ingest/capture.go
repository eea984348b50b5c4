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
type pending struct {
	ev      Event
	ip      netip.Addr
	ua      []byte
	country [2]byte // from a trusted proxy header; zero if none
	// buf backs the string fields of click events (see viewString), so a
	// click is captured without allocating.
	buf []byte
}

func (pe *pending) reset() {
	props := pe.ev.Props[:0]
	clear(props[:cap(props)]) // drop references to request strings
	pe.ev = Event{Props: props}
	pe.ip = netip.Addr{}
	pe.ua = pe.ua[:0]
	pe.country = [2]byte{}
	pe.buf = pe.buf[:0]
}

// span is a piece of pending.buf.
type span struct{ off, n int }

func (pe *pending) add(b []byte, limit int) span {
	b = b[:min(len(b), limit)]
	s := span{len(pe.buf), len(b)}
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
	return unsafe.String(&pe.buf[s.off], s.n)
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
	if pe.buf == nil {
		pe.buf = make([]byte, 0, 512)
	}
	pe.ev.Kind = KindClick
	pe.ev.Time = p.now().UnixMilli()
	h := &ctx.Request.Header
	codeSpan := pe.add(code, MaxCodeLen)
	refSpan := pe.addHost(referrerHost(h.Referer()))
	args := ctx.QueryArgs()
	var utm [5]span
	for i, name := range utmNames {
		utm[i] = pe.add(args.Peek(name), MaxUTMLen)
	}
	pe.ev.Code = pe.viewString(codeSpan)
	pe.ev.ReferrerHost = pe.viewString(refSpan)
	pe.ev.UTMSource = pe.viewString(utm[0])
	pe.ev.UTMMedium = pe.viewString(utm[1])
	pe.ev.UTMCampaign = pe.viewString(utm[2])
	pe.ev.UTMTerm = pe.viewString(utm[3])
	pe.ev.UTMContent = pe.viewString(utm[4])
	ua := h.UserAgent()
	pe.ua = append(pe.ua[:0], ua[:min(len(ua), maxUALen)]...)
	pe.ip, pe.country = p.clientOf(ctx)
	p.enqueue(pe)
}

var utmNames = [5]string{"utm_source", "utm_medium", "utm_campaign", "utm_term", "utm_content"}

// addHost appends a host lowercased, so equal hosts compare equal.
func (pe *pending) addHost(host []byte) span {
	host = host[:min(len(host), MaxHostLen)]
	s := span{len(pe.buf), len(host)}
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
	if xff := h.Peek("X-Forwarded-For"); len(xff) > 0 {
		client = p.clientFromXFF(xff, peer)
	}
	if p.cfg.CountryHeader != "" {
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

// countryCode accepts a two-letter code; "XX" (unknown) and "T1" (Tor)
// as sent by Cloudflare mean no country.
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
	if c == [2]byte{'X', 'X'} {
		return [2]byte{}
	}
	return c
}
