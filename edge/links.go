package edge

import (
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/store"
)

// linkView is a link as the API shows it.
// LinkView is the link object of the public API, for the clients in this
// module that decode it (the owner CLI).
type LinkView = linkView

type linkView struct {
	Code       string  `json:"code"`
	Domain     *string `json:"domain,omitempty"` // custom domain; absent on the default domain
	ShortURL   string  `json:"short_url"`
	URL        string  `json:"url"`
	Redirect   int     `json:"redirect"`
	ExpiresAt  *string `json:"expires_at"`
	ClickLimit *int64  `json:"click_limit"`
	Status     string  `json:"status"`
	CreatedAt  string  `json:"created_at"`
	UpdatedAt  string  `json:"updated_at"`
	// ReviewUntil: an edit of the destination shows the review
	// interstitial until then.
	ReviewUntil *string `json:"review_until,omitempty"`
	// ForwardQuery: a visit's query string is merged into the destination.
	ForwardQuery bool `json:"forward_query"`
	// Tags: lower case, sorted; [] when none.
	Tags []string `json:"tags"`
	// Rules: the redirect rules in order (rules.go); [] when none.
	Rules []ruleView `json:"rules"`
	// PasswordProtected: visitors must give the link's password (which is
	// never shown). Preview: the social preview; null for none.
	PasswordProtected bool           `json:"password_protected"`
	Preview           *store.Preview `json:"preview"`
}

func (s *Server) linkView(l *store.Link, now time.Time) linkView {
	v := linkView{
		Code:      l.ShortCode(),
		ShortURL:  s.shortURL(l),
		URL:       l.URL,
		Redirect:  int(l.Redirect),
		Status:    l.Status.String(),
		CreatedAt: formatMillis(l.CreatedAt),
		UpdatedAt: formatMillis(l.UpdatedAt),

		ForwardQuery: !l.NoForwardQuery,
		Tags:         store.SplitTags(l.Tags),
		Rules:        rulesView(l.Rules),
	}
	if v.Tags == nil {
		v.Tags = []string{}
	}
	v.PasswordProtected = l.PasswordHash != ""
	if p, err := store.DecodePreview(l.Preview); err == nil && !p.IsZero() {
		v.Preview = &p
	}
	if d := l.Domain(); d != "" {
		v.Domain = &d
	}
	if l.ExpiresAt != 0 {
		t := formatMillis(l.ExpiresAt)
		v.ExpiresAt = &t
		if l.Status == store.StatusActive && l.Expired(now) {
			v.Status = "expired"
		}
	}
	if l.ClickLimit != 0 {
		n := l.ClickLimit
		v.ClickLimit = &n
	}
	if l.InReview(now.UnixMilli()) {
		t := formatMillis(l.ReviewUntil)
		v.ReviewUntil = &t
	}
	return v
}

// checkDestination validates and normalises a destination, answering the
// problem itself when it is refused.
func (s *Server) checkDestination(ctx *fasthttp.RequestCtx, raw string) (destination, bool) {
	d, prob, detail := s.destinationProblem(raw)
	if prob != "" {
		writeProblem(ctx, prob, detail)
		return destination{}, false
	}
	return d, true
}

// destinationProblem validates and normalises a destination; a refused one
// comes back as a problem type and its detail.
func (s *Server) destinationProblem(raw string) (destination, string, string) {
	d, err := parseDestination(raw)
	if err != nil {
		return destination{}, probInvalidURL, err.Error()
	}
	if why := s.selfReason(d); why != "" {
		return destination{}, probInvalidURL, "url points at this short-link service itself (" + why + "); a short link to a short link is refused, so two links cannot redirect to each other"
	}
	for _, bl := range []*store.Blocklist{s.st.Blocklist(), s.blocked} {
		if e, ok := bl.Match(d.canon); ok {
			return destination{}, probDestinationBlocked, blockedDetail(d.canon.String(), e)
		}
	}
	return d, "", ""
}

// isOwnDestination reports whether d points back at this service, which
// would make a short link to a short link (or a redirect loop).
func (s *Server) isOwnDestination(d destination) bool { return s.selfReason(d) != "" }

// checkExpiry refuses an expiry that has already passed.
func checkExpiry(ctx *fasthttp.RequestCtx, ms int64, now time.Time) bool {
	if ms != 0 && ms <= now.UnixMilli() {
		writeProblem(ctx, probInvalidRequest, `field "expires_at" is in the past; to stop a link now, set its status to "disabled"`)
		return false
	}
	return true
}

func (s *Server) createLink(ctx *fasthttp.RequestCtx, owner store.Owner) {
	raw, ok := readBody(ctx)
	if !ok {
		return
	}
	req, rawRules, err := decodeCreate(raw)
	if err != nil {
		writeProblem(ctx, probInvalidRequest, err.Error())
		return
	}
	now := s.now()
	d, ok := s.checkDestination(ctx, req.URL)
	if !ok {
		return
	}
	req.URL = d.url
	rules, rerr := decodeRules(rawRules)
	if rerr == nil {
		req.Rules, rerr = s.checkRules(rules, req.Redirect)
	}
	if rerr != nil {
		writeRuleProblem(ctx, rerr)
		return
	}
	req.RulesHashed = base64.StdEncoding.EncodeToString([]byte(req.Rules))
	if !checkExpiry(ctx, req.ExpiresAt, now) {
		return
	}
	if req.Preview != nil && !s.checkPreviewImage(ctx, req.Preview) { // gates.go
		return
	}
	if req.Alias != "" {
		if err := s.checkAlias(req.Alias); err != nil {
			var ae *aliasError
			if errors.As(err, &ae) && ae.unavailable {
				writeProblem(ctx, probAliasUnavailable, err.Error())
			} else {
				writeProblem(ctx, probInvalidRequest, err.Error())
			}
			return
		}
	}

	domain, ok := s.linkDomain(ctx, owner, req.Domain)
	if !ok {
		return
	}
	req.Domain = domain // canonical, so equal requests hash equal

	idemKey, ok := idempotencyKey(ctx)
	if !ok {
		return
	}
	var reqHash [32]byte
	if idemKey != "" {
		reqHash = requestHash(owner.ID, "POST /v1/links", marshalJSON(req))
		rec, found, err := s.st.Idempotency(owner.ID, idemKey)
		if err != nil {
			s.log.Error("cannot read idempotency record", "owner", owner.ID, "err", err)
			writeProblem(ctx, probInternal, "the Idempotency-Key could not be checked")
			return
		}
		if found && idempotencyLive(&rec, now) {
			s.replay(ctx, &rec, reqHash, idemKey)
			return
		}
	}
	if req.Alias != "" {
		var existing store.Link
		taken, err := s.st.GetLink([]byte(store.LinkID(domain, req.Alias)), &existing)
		if err != nil {
			s.log.Error("cannot check alias", "alias", req.Alias, "err", err)
			writeProblem(ctx, probInternal, "the alias could not be checked")
			return
		}
		if taken {
			writeProblem(ctx, probAliasUnavailable, fmt.Sprintf("alias %q is already taken", req.Alias))
			return
		}
	}

	var passwordHash string
	if req.Password != "" {
		if passwordHash, ok = s.hashForAPI(ctx, req.Password); !ok { // password.go
			return
		}
	}

	// Only a create that is about to be made spends the domain's budget,
	// and one that is not made gives it back (createlimits.go).
	destDomain, ok := s.takeCreateDomain(ctx, d.host)
	if !ok {
		return
	}
	created := false
	defer func() {
		if !created {
			s.refundCreateDomain(destDomain)
		}
	}()
	wctx, cancel := s.writeContext(ctx)
	defer cancel()
	code := req.Alias
	if code == "" {
		if code, err = s.w.NewCode(wctx); err != nil {
			s.writeWriteError(ctx, "code allocation", err)
			return
		}
	}
	l := store.Link{
		Code:       store.LinkID(domain, code),
		URL:        req.URL,
		Owner:      owner.ID,
		CreatedAt:  now.UnixMilli(),
		UpdatedAt:  now.UnixMilli(),
		ExpiresAt:  req.ExpiresAt,
		ClickLimit: req.ClickLimit,
		Status:     store.StatusActive,
		Redirect:   uint16(req.Redirect),

		NoForwardQuery: req.NoForwardQuery,
		Tags:           req.Tags,
		Rules:          req.Rules,
		PasswordHash:   passwordHash,
	}
	if req.Preview != nil {
		l.Preview = store.EncodePreview(*req.Preview)
	}
	resp := marshalJSON(s.linkView(&l, now))
	var idem *store.IdempotencyWrite
	if idemKey != "" {
		idem = &store.IdempotencyWrite{Owner: owner.ID, Key: idemKey, Record: store.Idempotency{
			RequestHash: reqHash, Status: fasthttp.StatusCreated, Response: resp, CreatedAt: now.UnixMilli(),
		}}
	}
	index, existing, err := s.w.CreateLink(wctx, &l, idem)
	switch {
	case errors.Is(err, store.ErrCodeTaken) && req.Alias != "":
		writeProblem(ctx, probAliasUnavailable, fmt.Sprintf("alias %q is already taken", req.Alias))
		return
	case errors.Is(err, store.ErrCodeTaken):
		s.log.Error("BUG: generated code collided with an existing code", "code", code)
		writeProblem(ctx, probInternal, "the generated code was already in use; please retry")
		return
	case errors.Is(err, store.ErrIdempotencyMismatch):
		writeProblem(ctx, probIdempotencyMismatch, idempotencyMismatchDetail(idemKey))
		return
	case err != nil && s.writeDomainRefusal(ctx, domain, err):
		return
	case err != nil:
		s.writeWriteError(ctx, "create", err)
		return
	case existing != nil:
		// A concurrent request with the same key committed first.
		s.replay(ctx, existing, reqHash, idemKey)
		return
	}
	created = true
	loc := s.publicBase + linksPrefix + code
	if domain != "" {
		loc += "?domain=" + domain
	}
	ctx.Response.Header.Set("Location", loc)
	setIndex(ctx, index)
	writeJSON(ctx, fasthttp.StatusCreated, resp)
}

// ownedLink loads code for owner, answering 404 when it does not exist or
// belongs to someone else (never 403: that would confirm it exists).
func (s *Server) ownedLink(ctx *fasthttp.RequestCtx, owner store.Owner, code string) (store.Link, bool) {
	var l store.Link
	domain, okDomain := s.queryDomain(ctx) // ?domain= for a link on a custom domain
	if !validCodeSyntax(code) || !okDomain {
		writeProblem(ctx, probNotFound, fmt.Sprintf("there is no link %q", code))
		return l, false
	}
	code = store.LinkID(domain, code)
	found, err := s.st.GetLink([]byte(code), &l)
	if err != nil {
		s.log.Error("cannot read link", "code", code, "err", err)
		writeProblem(ctx, probInternal, "the link could not be read")
		return l, false
	}
	if !found {
		// Read-your-writes: the link may have been created a moment ago
		// through another node and not be applied here yet.
		l, found = s.askRemote([]byte(code), clientOf(ctx))
	}
	if !found || l.Owner != owner.ID {
		writeProblem(ctx, probNotFound, fmt.Sprintf("there is no link %q", code))
		return l, false
	}
	return l, true
}

func (s *Server) getLink(ctx *fasthttp.RequestCtx, owner store.Owner, code string) {
	l, ok := s.ownedLink(ctx, owner, code)
	if !ok {
		return
	}
	setIndex(ctx, l.Index)
	writeJSON(ctx, fasthttp.StatusOK, marshalJSON(s.linkView(&l, s.now())))
}

const (
	defaultListLimit = 50
	maxListLimit     = 1000
)

// operatorStatus reports whether only an operator may change the status.
func operatorStatus(st store.Status) bool {
	return st == store.StatusBlocked || st == store.StatusLegalBlock || st == store.StatusReview
}

func lockedDetail(l *store.Link) string {
	return fmt.Sprintf("link %q is %s by the operator; its owner cannot change its status", l.Code, operatorStatusText(l.Status))
}

func operatorStatusText(st store.Status) string {
	switch st {
	case store.StatusLegalBlock:
		return "legally blocked"
	case store.StatusReview:
		return "under review"
	}
	return "blocked"
}

func (s *Server) updateLink(ctx *fasthttp.RequestCtx, owner store.Owner, code string) {
	raw, ok := readBody(ctx)
	if !ok {
		return
	}
	req, err := decodePatch(raw)
	if err != nil {
		writeProblem(ctx, probInvalidRequest, err.Error())
		return
	}
	l, ok := s.ownedLink(ctx, owner, code)
	if !ok {
		return
	}
	now := s.now()
	p := store.LinkPatch{Code: l.Code, Owner: owner.ID, UpdatedAt: now.UnixMilli()}
	if req.url != nil {
		d, ok := s.checkDestination(ctx, *req.url)
		if !ok {
			return
		}
		if d.url != l.URL && l.Permanent() {
			writeProblem(ctx, probPermanentRedirect, fmt.Sprintf("link %q is a permanent %d redirect that browsers may have cached; its destination cannot change", l.Code, l.Redirect))
			return
		}
		p.SetURL, p.URL = true, d.url
		if s.cfg.EditReview > 0 {
			// Applied only if the destination really changes (in the FSM).
			p.ReviewUntil = now.Add(s.cfg.EditReview).UnixMilli()
		}
	}
	if req.setExpiry {
		if !checkExpiry(ctx, req.expiresAt, now) {
			return
		}
		p.SetExpiresAt, p.ExpiresAt = true, req.expiresAt
	}
	if req.setLimit {
		p.SetClickLimit, p.ClickLimit = true, req.clickLimit
	}
	if req.status != nil {
		if operatorStatus(l.Status) {
			writeProblem(ctx, probLinkLocked, lockedDetail(&l))
			return
		}
		p.SetStatus, p.Status = true, *req.status
	}
	if req.forward != nil && *req.forward == l.NoForwardQuery {
		p.SetForwardQuery, p.NoForwardQuery = true, !*req.forward
	}
	if req.setTags && req.tags != l.Tags {
		p.SetTags, p.Tags = true, req.tags
	}
	if req.setRules {
		rules, rerr := decodeRules(req.rules)
		var enc string
		if rerr == nil {
			enc, rerr = s.checkRules(rules, int(l.Redirect))
		}
		if rerr != nil {
			writeRuleProblem(ctx, rerr)
			return
		}
		if enc != l.Rules {
			p.SetRules, p.Rules = true, enc
			if enc != "" && s.cfg.EditReview > 0 {
				// New rule destinations are reviewed like a new url
				// (bait and switch); applied only if they change.
				p.ReviewUntil = now.Add(s.cfg.EditReview).UnixMilli()
			}
		}
	}
	if !s.patchGates(ctx, &l, req.gates, &p) { // gates.go
		return
	}
	if !p.SetURL && !p.SetExpiresAt && !p.SetClickLimit && !p.SetStatus && !p.SetForwardQuery && !p.SetTags && !p.SetRules && !p.SetPassword && !p.SetPreview {
		setIndex(ctx, l.Index)
		writeJSON(ctx, fasthttp.StatusOK, marshalJSON(s.linkView(&l, now)))
		return
	}
	updated, ok := s.applyPatch(ctx, &p, "update")
	if !ok {
		return
	}
	setIndex(ctx, updated.Index)
	writeJSON(ctx, fasthttp.StatusOK, marshalJSON(s.linkView(&updated, now)))
}

// deleteLink disables the link; the code stays reserved and answers 410.
func (s *Server) deleteLink(ctx *fasthttp.RequestCtx, owner store.Owner, code string) {
	l, ok := s.ownedLink(ctx, owner, code)
	if !ok {
		return
	}
	if operatorStatus(l.Status) {
		writeProblem(ctx, probLinkLocked, lockedDetail(&l))
		return
	}
	index := l.Index
	if l.Status != store.StatusDisabled {
		p := store.LinkPatch{Code: l.Code, Owner: owner.ID, UpdatedAt: s.now().UnixMilli(), SetStatus: true, Status: store.StatusDisabled}
		updated, ok := s.applyPatch(ctx, &p, "delete")
		if !ok {
			return
		}
		index = updated.Index
	}
	setIndex(ctx, index)
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

func (s *Server) applyPatch(ctx *fasthttp.RequestCtx, p *store.LinkPatch, what string) (store.Link, bool) {
	wctx, cancel := s.writeContext(ctx)
	defer cancel()
	updated, err := s.w.UpdateLink(wctx, p)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeProblem(ctx, probNotFound, fmt.Sprintf("there is no link %q", p.Code))
	case errors.Is(err, store.ErrPermanentRedirect):
		writeProblem(ctx, probPermanentRedirect, fmt.Sprintf("link %q is a permanent redirect; its destination cannot change", p.Code))
	case errors.Is(err, store.ErrPasswordPermanent):
		writeProblem(ctx, probPermanentRedirect, passwordPermanentDetail(p.Code))
	case errors.Is(err, store.ErrInvalidLinkGate):
		writeProblem(ctx, probInvalidRequest, err.Error())
	case errors.Is(err, store.ErrLinkLocked):
		writeProblem(ctx, probLinkLocked, fmt.Sprintf("link %q is locked by an operator (blocked, legal block or under review); the owner cannot change it", p.Code))
	case err != nil:
		s.writeWriteError(ctx, what, err)
	default:
		return updated, true
	}
	return store.Link{}, false
}
