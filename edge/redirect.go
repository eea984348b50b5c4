package edge

import (
	"strconv"
	"unsafe"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/store"
)

// Header names and values the hot path sets as raw bytes, so fasthttp
// neither normalises nor rewrites them.
var (
	hdrLocation       = []byte("Location")
	hdrCacheControl   = []byte("Cache-Control")
	hdrCSP            = []byte("Content-Security-Policy")
	hdrNoSniff        = []byte("X-Content-Type-Options")
	hdrReferrerPolicy = []byte("Referrer-Policy")

	valHTML       = []byte("text/html; charset=utf-8")
	valNoStore    = []byte("no-store")
	valPageCSP    = []byte("default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	valNoSniff    = []byte("nosniff")
	valNoReferrer = []byte("no-referrer")
	// Every 3xx: the destination learns the short link's origin at most,
	// never its path (the code), and nothing on a downgrade to http.
	valRedirectReferrer = []byte("strict-origin-when-cross-origin")
)

// serveCode answers GET and HEAD /{code}: cache, then Pebble, then the
// answer. Nothing here touches the network or Raft.
func (s *Server) serveCode(ctx *fasthttp.RequestCtx, code []byte) {
	if !ctx.IsGet() && !ctx.IsHead() {
		if ctx.IsPost() {
			s.serveUnlock(ctx, code) // a password attempt (password.go)
			return
		}
		ctx.Response.Header.Set("Allow", "GET, HEAD")
		writePage(ctx, fasthttp.StatusMethodNotAllowed, pageMethod)
		return
	}
	e, hit := s.lookup(ctx, code)
	if e == nil {
		s.m.redirectErrors.Inc()
		writePage(ctx, fasthttp.StatusInternalServerError, pageError)
		return
	}
	// Most links never expire: read the clock only for those that do, and
	// read it on every request, so an expired link answers 410 at once.
	var now int64
	kind := e.kind
	if e.expiresAt != 0 {
		now = s.now().UnixMilli()
		if now >= e.expiresAt && (kind == kindRedirect || kind == kindReview) {
			kind = kindGone
		}
	}
	// A suspended owner's links stop (suspended.go). While nobody is
	// suspended this is one atomic load.
	if (kind == kindRedirect || kind == kindReview) && s.suspended.Has(e.owner) {
		kind = kindGone
	}
	// Bait and switch: an edited destination is shown on the review
	// interstitial first until the edit's window closes.
	if kind == kindRedirect && e.reviewUntil != 0 {
		if now == 0 {
			now = s.now().UnixMilli()
		}
		if now < e.reviewUntil {
			kind = kindReview
		}
	}
	if kind == kindRedirect || kind == kindReview {
		// The destination may have been blocklisted after the link was
		// made: destBlocked, with its fast path written out here.
		v := e.blockSeen.Load()
		blocked := v&1 == 1
		if v>>1 != s.st.BlocklistGen() {
			blocked = s.destBlockedSlow(e)
		}
		if blocked {
			s.m.blocklisted.Inc()
			writePage(ctx, fasthttp.StatusGone, pageBlockedDest)
			return
		}
	}
	switch kind {
	case kindRedirect:
		if e.gated != nil { // a password or a preview (password.go, preview.go)
			s.serveGated(ctx, e, code, now, hit)
			return
		}
		if e.rules != nil {
			s.serveRules(ctx, e, code, hit, now) // rulematch.go
			return
		}
		writeRedirect(ctx, e, e.location, now)
		if hit {
			s.m.redirectHit.Inc()
		} else {
			s.m.redirectMiss.Inc()
		}
		// HEAD answers exactly like GET but is not a visit: link checkers
		// and unfurlers send it, and a click counted for them would be
		// a click nobody made.
		if s.onRedirect != nil && !ctx.IsHead() {
			s.onRedirect(ctx, code)
		}
		return
	case kindReview:
		if e.gated != nil && e.gated.passwordHash != "" {
			// The review page names the destination: the password first.
			s.passwords.forms.Inc()
			writeFormPage(ctx, fasthttp.StatusOK, e.gated.form)
			return
		}
		writePage(ctx, fasthttp.StatusOK, e.body)
	case kindNotFound:
		writePage(ctx, fasthttp.StatusNotFound, pageNotFound)
	case kindGone:
		writePage(ctx, fasthttp.StatusGone, pageGone)
	case kindLegal:
		writePage(ctx, fasthttp.StatusUnavailableForLegalReasons, pageLegal)
	default:
		writePage(ctx, int(e.status), e.body)
	}
	s.m.countKind(kind)
}

// lookup returns the answer for code and whether it came from the cache.
// A nil entry means the store failed (already logged).
func (s *Server) lookup(ctx *fasthttp.RequestCtx, code []byte) (*entry, bool) {
	if s.cache == nil {
		return s.load(ctx, code), false
	}
	if e := s.cache.get(code); e != nil {
		s.m.cacheHits.Inc()
		return e, true
	}
	s.m.cacheMisses.Inc()
	gen := s.cache.generation(code)
	e := s.load(ctx, code)
	if e != nil {
		s.cache.add(gen, e)
	}
	return e, false
}

// load builds the answer for code from the local store.
func (s *Server) load(ctx *fasthttp.RequestCtx, code []byte) *entry {
	var l store.Link
	found, err := s.st.GetLink(code, &l)
	if err != nil {
		s.log.Error("cannot load link for redirect", "code", string(code), "err", err)
		return nil
	}
	if !found {
		if l, ok := s.askRemote(code, clientOf(ctx)); ok {
			return s.buildEntry(code, &l)
		}
		return &entry{code: string(code), kind: kindNotFound, status: fasthttp.StatusNotFound}
	}
	return s.buildEntry(code, &l)
}

// askRemote is the read-your-writes fallback: only for codes that could be
// fresh, only with a short deadline, only within the remote gate's limits
// (remote.go), and any failure is a plain miss. The answer is cached like
// a local one; the local apply evicts it later.
func (s *Server) askRemote(code []byte, client clientKey) (store.Link, bool) {
	if s.remote == nil || s.maybeFresh == nil || !s.maybeFresh(code) {
		return store.Link{}, false
	}
	return s.remoteLink(string(code), client)
}

// buildEntry pre-builds everything a later hit copies into the response.
// A redirect's code, destination and header value share the entry's own
// allocation: one heap object per cached link, not two, for the garbage
// collector to mark on every cycle.
func (s *Server) buildEntry(code []byte, l *store.Link) *entry {
	if l.Status == store.StatusActive {
		public := l.Permanent()
		maxAge := s.privateMaxAge
		if public {
			maxAge = s.permanentMaxAge
		}
		var cc [40]byte
		cacheControl := appendCacheControl(cc[:0], public, maxAge)
		e, b := newEntryWithBytes(len(l.URL) + len(cacheControl) + len(code) + len(l.Owner))
		n := copy(b, l.URL)
		m := n + copy(b[n:], cacheControl)
		o := m + copy(b[m:], code)
		e.code, e.expiresAt = unsafe.String(unsafe.SliceData(b[m:]), len(code)), l.ExpiresAt // b never changes
		if copy(b[o:], l.Owner) > 0 {
			e.owner = unsafe.String(unsafe.SliceData(b[o:]), len(l.Owner))
		}
		e.kind, e.status, e.public, e.maxAge = kindRedirect, uint16(l.Redirect), public, maxAge
		e.location, e.cacheControl = b[:n:n], b[n:m:m]
		e.forwardQuery = !l.NoForwardQuery
		if l.Rules != "" {
			s.addRules(e, l)
		}
		if l.ReviewUntil != 0 {
			e.reviewUntil, e.body = l.ReviewUntil, reviewPage(hostOf(l.URL), l.URL)
		}
		e.gated = newGatedEntry(l)
		return e
	}
	e := &entry{code: string(code), owner: l.Owner, expiresAt: l.ExpiresAt}
	switch l.Status {
	case store.StatusLegalBlock:
		e.kind, e.status = kindLegal, fasthttp.StatusUnavailableForLegalReasons
	case store.StatusBlocked:
		e.kind, e.status = kindBlocked, fasthttp.StatusGone
		e.body = blockedPage(hostOf(l.URL))
	case store.StatusReview:
		e.kind, e.status = kindReview, fasthttp.StatusOK
		e.body = reviewPage(hostOf(l.URL), l.URL)
		e.location = []byte(l.URL) // for the blocklist check only
		if l.PasswordHash != "" {
			e.gated = newGatedEntry(l) // the form before the review page
		}
	default: // disabled, click-limited, or a status this build does not know
		e.kind, e.status = kindGone, fasthttp.StatusGone
	}
	return e
}

// writeRedirect copies a cached redirect to location (the entry's own, or
// a redirect rule's) into the response. It does not allocate: the header
// values are copied into the response's own buffers. now (Unix ms) is
// read only when the entry expires.
func writeRedirect(ctx *fasthttp.RequestCtx, e *entry, location []byte, now int64) {
	ctx.Response.SetStatusCode(int(e.status))
	h := &ctx.Response.Header
	if q := ctx.URI().QueryString(); len(q) > 0 && e.forwardQuery {
		var buf [1024]byte // longer answers allocate; the header copies it
		h.SetCanonical(hdrLocation, appendMergedQuery(buf[:0], location, q))
	} else {
		h.SetCanonical(hdrLocation, location)
	}
	h.SetCanonical(hdrReferrerPolicy, valRedirectReferrer)
	if ctx.IsHead() {
		// fasthttp leaves out an empty body's Content-Length on HEAD;
		// GET sends "0", and HEAD must answer with GET's headers.
		h.SetContentLength(0)
	}
	if e.expiresAt == 0 {
		h.SetCanonical(hdrCacheControl, e.cacheControl)
		return
	}
	// A browser must not keep following the redirect after the link expires.
	maxAge := min(e.maxAge, (e.expiresAt-now)/1000)
	var buf [40]byte
	h.SetCanonical(hdrCacheControl, appendCacheControl(buf[:0], e.public, maxAge))
}

func appendCacheControl(dst []byte, public bool, maxAge int64) []byte {
	if public {
		dst = append(dst, "public, max-age="...)
	} else {
		dst = append(dst, "private, max-age="...)
	}
	return strconv.AppendInt(dst, max(0, maxAge), 10)
}

// writePage answers with one of the HTML pages. body is shared and never
// modified, so it is handed to fasthttp without a copy.
func writePage(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.Response.SetStatusCode(status)
	h := &ctx.Response.Header
	h.SetContentTypeBytes(valHTML)
	h.SetCanonical(hdrCacheControl, valNoStore)
	h.SetCanonical(hdrCSP, valPageCSP)
	h.SetCanonical(hdrNoSniff, valNoSniff)
	h.SetCanonical(hdrReferrerPolicy, valNoReferrer)
	ctx.Response.SetBodyRaw(body)
}

// hostOf returns the host a stored destination points at, for the pages.
func hostOf(url string) string {
	if d, err := parseDestination(url); err == nil {
		return d.host
	}
	return "an unknown site"
}
