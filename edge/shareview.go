package edge

import (
	"html"
	"strconv"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/store"
)

// The viewer's side of a shared dashboard: /share/{token}[/...].

// Password attempts: per client address and per share, in this node's
// memory (a client that spreads its guesses over several nodes gets the
// allowance of each).
const (
	shareUnlockRate       = 1.0 / 6 // per client: one attempt every 6 s...
	shareUnlockBurst      = 10      // ...after ten at once
	shareUnlockShareRate  = 1.0     // per share, from every client
	shareUnlockShareBurst = 30
)

// shareDesk holds the viewer side's limits and the share metrics.
type shareDesk struct {
	perClient *limiter[clientKey]
	perShare  *limiter[string]
	m         shareMetrics
}

type shareMetrics struct {
	created, revoked                     *metrics.Counter
	views, notFound, forbidden           *metrics.Counter
	unlockOK, unlockWrong, unlockLimited *metrics.Counter
}

func newShareDesk(now func() time.Time, set *metrics.Set) *shareDesk {
	req := func(r string) *metrics.Counter {
		return set.GetOrCreateCounter(`waymark_share_requests_total{result="` + r + `"}`)
	}
	unlock := func(r string) *metrics.Counter {
		return set.GetOrCreateCounter(`waymark_share_unlocks_total{result="` + r + `"}`)
	}
	return &shareDesk{
		perClient: newLimiter[clientKey](shareUnlockRate, shareUnlockBurst, now),
		perShare:  newLimiter[string](shareUnlockShareRate, shareUnlockShareBurst, now),
		m: shareMetrics{
			created: set.GetOrCreateCounter("waymark_share_created_total"),
			revoked: set.GetOrCreateCounter("waymark_share_revoked_total"),
			views:   req("page"), notFound: req("not_found"), forbidden: req("forbidden"),
			unlockOK: unlock("ok"), unlockWrong: unlock("wrong"), unlockLimited: unlock("limited"),
		},
	}
}

var (
	pageShareNotFound = page("Dashboard not found", `<p>This shared dashboard does not exist or was revoked by its owner.</p>`)
	// The password form posts to its own URL; its CSP allows that and
	// nothing else.
	valSharePageCSP = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)

func sharePasswordPage(title, errText string) []byte {
	body := `<p>This dashboard is protected by a password. Ask its owner for it.</p>
<form method="post" autocomplete="off">
<label for="password">Password</label><br>
<input id="password" name="password" type="password" required autofocus style="font:inherit;padding:.4em;margin:.4em 0;width:100%;box-sizing:border-box">
`
	if errText != "" {
		body += `<p class="warning" role="alert" id="share-error">` + html.EscapeString(errText) + "</p>\n"
	}
	body += `<button class="button" type="submit" style="border:0;font:inherit;cursor:pointer">Open dashboard</button>
</form>`
	return page(title, body)
}

func writeSharePage(ctx *fasthttp.RequestCtx, status int, body []byte) {
	writePage(ctx, status, body)
	ctx.Response.Header.Set("Content-Security-Policy", valSharePageCSP)
	ctx.Response.Header.Set("X-Frame-Options", "DENY")
	ctx.Response.Header.Set("X-Robots-Tag", "noindex, nofollow")
}

// serveShare answers every path under /share/.
func (s *Server) serveShare(ctx *fasthttp.RequestCtx) {
	rest := string(ctx.Path()[len(sharePrefix):])
	text, sub, nested := strings.Cut(rest, "/")
	isAPI := sub == "about" || strings.HasPrefix(sub, "v1/")
	notFound := func() {
		s.shares.m.notFound.Inc()
		if isAPI {
			writeProblem(ctx, probNotFound, "there is no such shared dashboard, or it was revoked")
			return
		}
		writeSharePage(ctx, fasthttp.StatusNotFound, pageShareNotFound)
	}
	tok, ok := ParseShareToken(text)
	if !ok || s.cfg.Shares.Page == nil {
		notFound()
		return
	}
	sh, found, err := s.st.ShareByHash(store.HashShareToken(tok))
	if err != nil {
		s.log.Error("cannot read share", "err", err)
		writeProblem(ctx, probInternal, "the shared dashboard could not be read")
		return
	}
	if !found {
		notFound()
		return
	}
	g, ok := s.shareGrant(&sh)
	if !ok {
		notFound()
		return
	}
	unlocked := sh.PasswordHash == "" ||
		shareCookieValid(s.cfg.Shares.CookieKey, &sh, ctx.Request.Header.Cookie(shareCookieName+sh.ID), s.now())
	switch {
	case nested && sub == "":
		// /share/{token}/: the page finds its share from its exact path.
		ctx.Redirect(sharePrefix+text, fasthttp.StatusPermanentRedirect)
	case sub == "" && ctx.IsPost():
		s.unlockShare(ctx, &sh, text)
	case sub == "":
		if !ctx.IsGet() && !ctx.IsHead() {
			ctx.Response.Header.Set("Allow", "GET, HEAD, POST")
			writePage(ctx, fasthttp.StatusMethodNotAllowed, pageMethod)
			return
		}
		if !unlocked {
			writeSharePage(ctx, fasthttp.StatusOK, sharePasswordPage(shareTitle(&sh), ""))
			return
		}
		s.shares.m.views.Inc()
		s.cfg.Shares.Page(ctx)
		ctx.Response.Header.Set("Cache-Control", "no-store") // the page is the same for every share, but its URL is a secret
		ctx.Response.Header.Set("X-Robots-Tag", "noindex, nofollow")
	case !isAPI:
		notFound()
	case !unlocked:
		writeProblem(ctx, probUnauthorized, "this shared dashboard needs its password: open "+sharePrefix+"{token} in a browser and enter it")
	case !ctx.IsGet() && !ctx.IsHead():
		ctx.Response.Header.Set("Allow", "GET, HEAD")
		s.shares.m.forbidden.Inc()
		writeProblem(ctx, probInsufficientScope, "a shared dashboard is read-only")
	case sub == "about":
		s.shareAbout(ctx, &g)
	default:
		g.APIPath = "/" + sub
		if !shareAllows(&g) {
			s.shares.m.forbidden.Inc()
			writeProblem(ctx, probNotFound, "a shared dashboard reads only the stats of its own "+sh.Kind.String())
			return
		}
		if s.cfg.Shares.Stats == nil {
			writeRetryProblem(ctx, probUnavailable, "this node does not serve stats", 30)
			return
		}
		s.cfg.Shares.Stats(ctx, g)
	}
}

// shareGrant checks that the share's site or link still exists, is still
// its owner's and that the owner is not suspended.
func (s *Server) shareGrant(sh *store.Share) (ShareGrant, bool) {
	g := ShareGrant{Share: *sh}
	if s.suspended.Has(sh.Owner) {
		return g, false
	}
	if sh.Kind == store.ShareSite {
		site, found, err := s.st.Site(sh.Target)
		return g, err == nil && found && site.Owner == sh.Owner
	}
	var l store.Link
	found, err := s.st.GetLink([]byte(sh.Target), &l)
	if err != nil || !found || l.Owner != sh.Owner || l.Status == store.StatusDisabled {
		return g, false
	}
	g.Domain, g.Code = store.SplitLinkID(l.Code)
	return g, true
}

// shareAllows reports whether g.APIPath is a stats read of the share's own
// site or link: /v1/sites/{id}/stats/{what} or /v1/links/{code}/stats[/{what}].
// Which {what} exist is the stats handler's to say.
func shareAllows(g *ShareGrant) bool {
	var rest string
	var ok bool
	if g.Share.Kind == store.ShareSite {
		if rest, ok = strings.CutPrefix(g.APIPath, sitesPrefix+g.Share.Target+"/stats"); !ok {
			return false
		}
		return len(rest) > 1 && rest[0] == '/' && strings.IndexByte(rest[1:], '/') < 0
	}
	if rest, ok = strings.CutPrefix(g.APIPath, linksPrefix+g.Code+"/stats"); !ok {
		return false
	}
	return rest == "" || (len(rest) > 1 && rest[0] == '/' && strings.IndexByte(rest[1:], '/') < 0)
}

func shareTitle(sh *store.Share) string {
	if sh.Name != "" {
		return sh.Name
	}
	return "Shared dashboard"
}

// shareAbout tells the page what it shows.
func (s *Server) shareAbout(ctx *fasthttp.RequestCtx, g *ShareGrant) {
	out := struct {
		Kind     string `json:"kind"`
		Name     string `json:"name"`
		SiteID   string `json:"site_id,omitempty"`
		Domain   string `json:"domain,omitempty"`
		Timezone string `json:"timezone,omitempty"`
		Link     string `json:"link,omitempty"`
		ShortURL string `json:"short_url,omitempty"`
	}{Kind: g.Share.Kind.String(), Name: g.Share.Name}
	if g.Share.Kind == store.ShareSite {
		site, found, err := s.st.Site(g.Share.Target)
		if err != nil || !found {
			writeProblem(ctx, probNotFound, "there is no such shared dashboard, or it was revoked")
			return
		}
		out.SiteID, out.Domain, out.Timezone = site.ID, site.Domain, site.Timezone
	} else {
		var l store.Link
		if found, err := s.st.GetLink([]byte(g.Share.Target), &l); err != nil || !found {
			writeProblem(ctx, probNotFound, "there is no such shared dashboard, or it was revoked")
			return
		}
		out.Link, out.Domain, out.ShortURL = g.Code, g.Domain, s.linkView(&l, s.now()).ShortURL
	}
	writeJSON(ctx, fasthttp.StatusOK, marshalJSON(out))
}

// unlockShare checks a password form post; a match sets the cookie and
// sends the browser back to the dashboard (303), a mismatch shows the
// form again (401).
func (s *Server) unlockShare(ctx *fasthttp.RequestCtx, sh *store.Share, text string) {
	self := sharePrefix + text
	if sh.PasswordHash == "" {
		ctx.Redirect(self, fasthttp.StatusSeeOther)
		return
	}
	if len(s.cfg.Shares.CookieKey) == 0 {
		writeRetryProblem(ctx, probUnavailable, "this node cannot unlock shared dashboards", 30)
		return
	}
	// The client as the create limits see it (behind --trusted-proxies,
	// from X-Forwarded-For), except that a loopback client is limited too:
	// guesses from the node's own host are guesses all the same.
	client, known := s.creates.clientOf(ctx)
	if !known {
		client = clientOf(ctx)
	}
	for _, ok := range []func() (bool, time.Duration){
		func() (bool, time.Duration) { return s.shares.perClient.allow(client) },
		func() (bool, time.Duration) { return s.shares.perShare.allow(sh.ID) },
	} {
		if allowed, wait := ok(); !allowed {
			s.shares.m.unlockLimited.Inc()
			secs := max(1, int((wait+time.Second-1)/time.Second))
			ctx.Response.Header.Set("Retry-After", strconv.Itoa(secs))
			writeSharePage(ctx, fasthttp.StatusTooManyRequests, sharePasswordPage(shareTitle(sh), "Too many attempts; wait "+strconv.Itoa(secs)+" s and try again."))
			return
		}
	}
	password := ctx.PostArgs().Peek("password")
	ok := false
	if len(password) > 0 && len(password) <= MaxPasswordLen {
		// The argon2id slots the link passwords use (password.go): they
		// bound the memory checks take, whatever is attacked.
		if !s.passwords.acquire() {
			s.passwords.busy.Inc()
			writeRetryProblem(ctx, probUnavailable, "too many password checks are running; retry in a moment", 1)
			return
		}
		ok = s.passwords.verify(sh.PasswordHash, password)
		s.passwords.release()
	}
	if !ok {
		s.shares.m.unlockWrong.Inc()
		writeSharePage(ctx, fasthttp.StatusUnauthorized, sharePasswordPage(shareTitle(sh), "Incorrect password. Please try again."))
		return
	}
	s.shares.m.unlockOK.Inc()
	expires := s.now().Add(shareCookieTTL).Unix()
	c := fasthttp.AcquireCookie()
	defer fasthttp.ReleaseCookie(c)
	c.SetKey(shareCookieName + sh.ID)
	c.SetValue(shareCookieValue(s.cfg.Shares.CookieKey, sh, expires))
	c.SetPath(self)
	c.SetMaxAge(int(shareCookieTTL / time.Second))
	c.SetHTTPOnly(true)
	c.SetSameSite(fasthttp.CookieSameSiteLaxMode) // Lax: a link from elsewhere to an unlocked share still opens it
	c.SetSecure(ctx.IsTLS() || strings.HasPrefix(s.publicBase, "https://"))
	ctx.Response.Header.SetCookie(c)
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.Redirect(self, fasthttp.StatusSeeOther)
}
