package edge

import (
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"html"
	"strconv"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"
	"golang.org/x/crypto/argon2"

	"github.com/waymark/waymark/store"
)

// Password-protected links (issue 13.2). The API takes the password, and
// the node that took the call hashes it with argon2id before the Raft
// command is made, so the log, the replicas and the forwarded write only
// ever see the PHC string. GET /{code} answers a form page that holds no
// destination; POST /{code} with the right password answers the link's
// redirect, and only that counts a click.
//
//	unlock: fasthttp -> cache entry (gated) -> rate limits (client+link, link) -> argon2id slot -> verify -> 3xx -> OnRedirect

// Argon2id parameters for new hashes: OWASP's first recommendation
// (19 MiB, 2 passes, 1 lane). Each hash names its own, so raising them
// later leaves old hashes readable.
const (
	passwordMemoryKiB = 19 << 10
	passwordTime      = 2
	passwordThreads   = 1
	passwordSaltLen   = 16
	passwordKeyLen    = 32

	// MaxPasswordLen bounds a password (bytes), on the API and the form.
	MaxPasswordLen = 256
	// maxUnlockBody bounds the form body read on POST /{code}.
	maxUnlockBody = 4 << 10
)

// Attempt limits, per minute. Every attempt counts, right or wrong, and
// the limits are taken before the (deliberately slow) check runs.
const (
	unlockPerClientLink = 5  // one client address on one link
	unlockPerLink       = 30 // every client on one link
	// unlockSlotWait is how long an attempt waits for an argon2id slot
	// before it is answered 503: the slots bound the memory checks take
	// (each holds passwordMemoryKiB) however many links are attacked.
	unlockSlotWait = 2 * time.Second
)

// clientLinkKey is one client address on one link.
type clientLinkKey struct {
	client clientKey
	link   string
}

// passwordGate holds the attempt limits, the argon2id slots and metrics.
type passwordGate struct {
	perClient *limiter[clientLinkKey]
	perLink   *limiter[string]
	slots     chan struct{}

	forms, unlocked, wrong, limitedClient, limitedLink, busy, hashes *metrics.Counter
	checkSeconds                                                     *metrics.Histogram
}

func newPasswordGate(now func() time.Time, set *metrics.Set, slots int) *passwordGate {
	attempts := func(r string) *metrics.Counter {
		return set.GetOrCreateCounter(`waymark_password_attempts_total{result="` + r + `"}`)
	}
	return &passwordGate{
		perClient:     newLimiter[clientLinkKey](unlockPerClientLink/60.0, unlockPerClientLink, now),
		perLink:       newLimiter[string](unlockPerLink/60.0, unlockPerLink, now),
		slots:         make(chan struct{}, max(1, slots)),
		forms:         set.GetOrCreateCounter("waymark_password_forms_total"),
		unlocked:      attempts("unlocked"),
		wrong:         attempts("wrong"),
		limitedClient: attempts("limited_client"),
		limitedLink:   attempts("limited_link"),
		busy:          attempts("busy"),
		hashes:        set.GetOrCreateCounter("waymark_password_hashes_total"),
		checkSeconds:  set.GetOrCreateHistogram("waymark_password_check_seconds"),
	}
}

// errPasswordBusy means no argon2id slot came free in time.
var errPasswordBusy = errors.New("too many password checks in flight")

// acquire takes an argon2id slot, waiting at most unlockSlotWait.
func (g *passwordGate) acquire() bool {
	select {
	case g.slots <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(unlockSlotWait)
	defer t.Stop()
	select {
	case g.slots <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}

func (g *passwordGate) release() { <-g.slots }

// hash returns the PHC string of password with a fresh salt.
func (g *passwordGate) hash(password string) (string, error) {
	h := store.PasswordHash{MemoryKiB: passwordMemoryKiB, Time: passwordTime, Threads: passwordThreads, Salt: make([]byte, passwordSaltLen)}
	if _, err := rand.Read(h.Salt); err != nil {
		return "", fmt.Errorf("cannot make a password salt: %w", err)
	}
	if !g.acquire() {
		return "", errPasswordBusy
	}
	h.Key = argon2.IDKey([]byte(password), h.Salt, h.Time, h.MemoryKiB, h.Threads, passwordKeyLen)
	g.release()
	g.hashes.Inc()
	return h.String(), nil
}

// verify checks password against a stored PHC string in constant time.
// The caller holds a slot.
func (g *passwordGate) verify(phc string, password []byte) bool {
	h, err := store.ParsePasswordHash(phc)
	if err != nil {
		return false // the decoders refuse such a record; never a match
	}
	start := time.Now()
	key := argon2.IDKey(password, h.Salt, h.Time, h.MemoryKiB, h.Threads, uint32(len(h.Key)))
	g.checkSeconds.UpdateDuration(start)
	return subtle.ConstantTimeCompare(key, h.Key) == 1
}

// checkPassword refuses a password the API does not take.
func checkPassword(pw string) error {
	if pw == "" || len(pw) > MaxPasswordLen {
		return fmt.Errorf(`field "password" must be 1 to %d bytes; send null or "" to remove it`, MaxPasswordLen)
	}
	return nil
}

// hashForAPI hashes a password for a create or an edit, answering the
// problem itself when it cannot.
func (s *Server) hashForAPI(ctx *fasthttp.RequestCtx, pw string) (string, bool) {
	h, err := s.passwords.hash(pw)
	switch {
	case errors.Is(err, errPasswordBusy):
		ctx.Response.Header.Set("Retry-After", "1")
		writeProblem(ctx, probUnavailable, "too many password hashes are being computed; retry in a moment")
		return "", false
	case err != nil:
		s.log.Error("cannot hash link password", "err", err)
		writeProblem(ctx, probInternal, "the password could not be hashed")
		return "", false
	}
	return h, true
}

// gatedEntry is what a link with a password or a preview adds to its cache
// entry. Links without either have none, and their redirect checks one
// nil pointer.
type gatedEntry struct {
	passwordHash string // PHC string; "" for no password
	form         []byte // the password form
	formWrong    []byte // the form again, saying the password was wrong
	formLimited  []byte // the form again, saying to wait
	preview      []byte // the page crawlers get; nil for no preview
}

// newGatedEntry pre-builds the pages of a link with a password or a
// preview; nil for a link with neither.
func newGatedEntry(l *store.Link) *gatedEntry {
	if l.PasswordHash == "" && l.Preview == "" {
		return nil
	}
	p, _ := store.DecodePreview(l.Preview) // the record decoder checked it
	g := &gatedEntry{passwordHash: l.PasswordHash}
	if l.PasswordHash != "" {
		head := previewMeta(p) // unfurlers show the owner's preview, never the destination
		g.form = passwordPage(head, "")
		g.formWrong = passwordPage(head, "That password is not right. Try again.")
		g.formLimited = passwordPage(head, "Too many attempts. Wait a minute, then try again.")
		return g
	}
	g.preview = previewPage(p, l.URL)
	return g
}

// passwordPage is the form: no destination, no script, posting to the
// page's own address (query included, so query forwarding still works).
func passwordPage(head, msg string) []byte {
	body := `<p>This short link is protected by a password.</p>`
	if msg != "" {
		body += `<p class="warning" role="alert">` + html.EscapeString(msg) + `</p>`
	}
	body += `<form method="post" autocomplete="off">` +
		`<label for="password">Password</label>` +
		`<input type="password" id="password" name="password" required autofocus maxlength="` + strconv.Itoa(MaxPasswordLen) + `">` +
		`<button type="submit">Continue</button></form>`
	return pageWithHead("Password required", head, body)
}

// valFormCSP is the form page's policy: nothing may load but its inline
// style. form-action is left out on purpose: Chromium applies form-action
// to the redirects that answer a submission, so form-action 'self' would
// block the redirect to the destination after the right password (checked
// with the browser); listing the destination's origin would tell it to
// anyone without the password. The page holds no markup but its own, so
// nothing could plant another form.
var (
	valFormCSP   = []byte("default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'")
	hdrRobotsTag = []byte("X-Robots-Tag")
	valNoIndex   = []byte("noindex, nofollow")
	hdrVary      = []byte("Vary")
	valVaryUA    = []byte("User-Agent")
)

// writeFormPage answers with a password page: no-store, noindex, the
// form's policy.
func writeFormPage(ctx *fasthttp.RequestCtx, status int, body []byte) {
	writePage(ctx, status, body)
	h := &ctx.Response.Header
	h.SetCanonical(hdrCSP, valFormCSP)
	h.SetCanonical(hdrRobotsTag, valNoIndex)
}

// serveUnlock answers POST /{code}: a password attempt. The limits are
// taken before the check, and only the right password counts a click.
func (s *Server) serveUnlock(ctx *fasthttp.RequestCtx, code []byte) {
	e, _ := s.lookup(ctx, code)
	if e == nil {
		s.m.redirectErrors.Inc()
		writePage(ctx, fasthttp.StatusInternalServerError, pageError)
		return
	}
	if e.gated == nil || e.gated.passwordHash == "" {
		// Not a password link (or no link): POST is not a method of it.
		ctx.Response.Header.Set("Allow", "GET, HEAD")
		writePage(ctx, fasthttp.StatusMethodNotAllowed, pageMethod)
		return
	}
	kind, now := s.liveKind(e)
	if kind != kindRedirect && kind != kindReview {
		switch kind {
		case kindLegal:
			writePage(ctx, fasthttp.StatusUnavailableForLegalReasons, pageLegal)
		case kindBlocked:
			writePage(ctx, int(e.status), e.body)
		default:
			writePage(ctx, fasthttp.StatusGone, pageGone)
		}
		return
	}
	if (kind == kindRedirect || kind == kindReview) && s.blockedNow(e) {
		s.m.blocklisted.Inc()
		writePage(ctx, fasthttp.StatusGone, pageBlockedDest)
		return
	}
	g, pg := e.gated, s.passwords
	link := string(code)
	if ok, wait := pg.perClient.allow(clientLinkKey{clientOf(ctx), link}); !ok {
		pg.limitedClient.Inc()
		writeUnlockLimited(ctx, g, wait)
		return
	}
	if ok, wait := pg.perLink.allow(link); !ok {
		pg.perClient.refund(clientLinkKey{clientOf(ctx), link})
		pg.limitedLink.Inc()
		writeUnlockLimited(ctx, g, wait)
		return
	}
	pw := ctx.PostArgs().Peek("password")
	if len(ctx.PostBody()) > maxUnlockBody || len(pw) == 0 || len(pw) > MaxPasswordLen {
		pg.wrong.Inc()
		writeFormPage(ctx, fasthttp.StatusOK, g.formWrong)
		return
	}
	if !pg.acquire() {
		pg.busy.Inc()
		ctx.Response.Header.Set("Retry-After", "1")
		writeFormPage(ctx, fasthttp.StatusServiceUnavailable, g.formLimited)
		return
	}
	right := pg.verify(g.passwordHash, pw)
	pg.release()
	if !right {
		// 200, not 401: 401 requires a WWW-Authenticate challenge (RFC
		// 9110, 15.5.2) and a form is no HTTP authentication scheme.
		pg.wrong.Inc()
		writeFormPage(ctx, fasthttp.StatusOK, g.formWrong)
		return
	}
	pg.unlocked.Inc()
	if kind == kindReview {
		writePage(ctx, fasthttp.StatusOK, e.body) // the edit's review page, as without a password
		return
	}
	loc, rule := e.location, uint8(0)
	if e.rules != nil { // unlocked, the visit follows the rules (rulematch.go)
		var ok bool
		if loc, rule, ok = s.pickRule(ctx, e, now); !ok {
			return
		}
	}
	writeRedirect(ctx, e, loc, now)
	// The answer to a POST: 307 and 308 would send the form, password and
	// all, on to the destination; 303 makes it a GET.
	if e.status == fasthttp.StatusTemporaryRedirect || e.status == fasthttp.StatusPermanentRedirect {
		ctx.Response.SetStatusCode(fasthttp.StatusSeeOther)
	}
	ctx.Response.Header.SetCanonical(hdrCacheControl, valNoStore)
	if e.rules != nil {
		s.captureRuleClick(ctx, code, rule)
	} else if s.onRedirect != nil {
		s.onRedirect(ctx, code)
	}
}

func writeUnlockLimited(ctx *fasthttp.RequestCtx, g *gatedEntry, wait time.Duration) {
	secs := max(1, int64((wait+time.Second-1)/time.Second))
	ctx.Response.Header.Set("Retry-After", strconv.FormatInt(secs, 10))
	writeFormPage(ctx, fasthttp.StatusTooManyRequests, g.formLimited)
}

// liveKind is serveCode's decision for e at this moment (expiry, a
// suspended owner, an edit's review window), for the unlock path; keep
// the two in step.
func (s *Server) liveKind(e *entry) (entryKind, int64) {
	now := s.now().UnixMilli()
	kind := e.kind
	if e.expiresAt != 0 && now >= e.expiresAt && (kind == kindRedirect || kind == kindReview) {
		kind = kindGone
	}
	if (kind == kindRedirect || kind == kindReview) && s.suspended.Has(e.owner) {
		kind = kindGone
	}
	if kind == kindRedirect && e.reviewUntil != 0 && now < e.reviewUntil {
		kind = kindReview
	}
	return kind, now
}

// blockedNow is serveCode's blocklist check of e's destination.
func (s *Server) blockedNow(e *entry) bool {
	v := e.blockSeen.Load()
	if v>>1 != s.st.BlocklistGen() {
		return s.destBlockedSlow(e)
	}
	return v&1 == 1
}
