package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/store"
)

// Shared dashboards (issue 13 point 6), as Plausible's shared links:
//
//	POST   /v1/sites/{id}/shares           {"name"?, "password"?}: a new share; its URL is in this answer only
//	GET    /v1/sites/{id}/shares           the site's shares (never their tokens)
//	DELETE /v1/sites/{id}/shares/{sid}     revoke
//	(and the same under /v1/links/{code}/shares, ?domain= as elsewhere)
//
//	GET  /share/{token}                    the dashboard, without an API key
//	POST /share/{token}                    password=...: unlock a protected share (sets a cookie)
//	GET  /share/{token}/about              what the share opens (the page's first read)
//	GET  /share/{token}/v1/.../stats...    the stats reads of that one site or link, nothing else
//
// The token is 16 random bytes in base64url; the store keeps only its
// SHA-256, so its URL is shown once. Every request reads the share from
// this node's replica, so a revocation holds on a node as soon as the node
// applies it. A password is stored as an argon2id hash; a correct one
// sets a cookie, valid for 24 hours and scoped to the share's path, that
// every node of the cluster accepts (it is signed with a key derived from
// the cluster key).

const (
	sharePrefix      = "/share/"
	sharesSuffix     = "/shares"
	shareCookieName  = "wm_share_"
	shareCookieTTL   = 24 * time.Hour // Plausible's
	newShareAttempts = 3
)

// ShareConfig wires shared dashboards into the edge. The zero value
// serves the share API but answers 404 on /share/.
type ShareConfig struct {
	// Page serves the dashboard page (rollup/api's DashboardHandler): the
	// same page as /dashboard, which finds its share from its own path.
	Page fasthttp.RequestHandler
	// Stats answers a stats read that the share allows (g.APIPath is the
	// /v1/ path without the /share/{token} prefix). It runs after the
	// token, the share's target and any password cookie were checked.
	Stats func(ctx *fasthttp.RequestCtx, g ShareGrant)
	// CookieKey signs the cookie a password unlock sets; every node of a
	// cluster needs the same key. Without one, protected shares cannot be
	// unlocked.
	CookieKey []byte
}

// ShareGrant is what a checked share token allows one request to read.
type ShareGrant struct {
	Share   store.Share
	Domain  string // link shares: the link's custom domain, "" on the public one
	Code    string // link shares: the short code
	APIPath string // the /v1/... path asked for
}

// ShareWriter is what the server needs to make and revoke shares; the
// writer the node hands the server implements it (raft.Node, through the
// disk guard). Without it the share writes answer 503.
type ShareWriter interface {
	CreateShare(ctx context.Context, s *store.Share) (store.Share, error)
	DeleteShare(ctx context.Context, owner string, kind store.ShareKind, target, id string) error
}

// shareTarget is the site or link a /v1/.../shares path names.
type shareTarget struct {
	kind store.ShareKind
	id   string // the site id, or the link's code as in the path
	sub  string // "" for the collection, else the share id
}

// parseSharesPath recognises /v1/sites/{id}/shares[/{sid}] and
// /v1/links/{code}/shares[/{sid}].
func parseSharesPath(path string) (shareTarget, bool) {
	var t shareTarget
	rest, ok := strings.CutPrefix(path, sitesPrefix)
	t.kind = store.ShareSite
	if !ok {
		if rest, ok = strings.CutPrefix(path, linksPrefix); !ok {
			return t, false
		}
		t.kind = store.ShareLink
	}
	id, sub, ok := strings.Cut(rest, "/")
	if !ok || id == "" {
		return t, false
	}
	sub, ok = strings.CutPrefix("/"+sub, sharesSuffix)
	if !ok || (sub != "" && (sub[0] != '/' || len(sub) == 1 || strings.IndexByte(sub[1:], '/') >= 0)) {
		return t, false
	}
	t.id, t.sub = id, strings.TrimPrefix(sub, "/")
	return t, true
}

// dispatchShares routes the share API and reports whether path was one.
func (s *Server) dispatchShares(ctx *fasthttp.RequestCtx, path, method string) (string, bool) {
	t, ok := parseSharesPath(path)
	if !ok {
		return "", false
	}
	if t.sub == "" {
		switch method {
		case fasthttp.MethodPost:
			s.withOwner(ctx, true, func(ctx *fasthttp.RequestCtx, o store.Owner) { s.createShare(ctx, o, t) })
			return "shares.create", true
		case fasthttp.MethodGet:
			s.withOwner(ctx, false, func(ctx *fasthttp.RequestCtx, o store.Owner) { s.listShares(ctx, o, t) })
			return "shares.list", true
		}
		methodNotAllowed(ctx, "GET, POST")
		return "shares", true
	}
	if method != fasthttp.MethodDelete {
		methodNotAllowed(ctx, "DELETE")
		return "share", true
	}
	s.withOwner(ctx, true, func(ctx *fasthttp.RequestCtx, o store.Owner) { s.deleteShare(ctx, o, t) })
	return "shares.delete", true
}

// ownedShareTarget checks that the caller owns the site or link and
// returns its stored identifier (a link's "domain/code"), or answers 404.
func (s *Server) ownedShareTarget(ctx *fasthttp.RequestCtx, owner store.Owner, t shareTarget) (string, bool) {
	if t.kind == store.ShareSite {
		site, ok := s.ownedSite(ctx, owner, t.id)
		return site.ID, ok
	}
	l, ok := s.ownedLink(ctx, owner, t.id)
	return l.Code, ok
}

// ShareView is a share as the API shows it. URL is set only in the
// answer that creates the share: the token is not stored.
type ShareView struct {
	ID                string `json:"id"`
	Name              string `json:"name"`
	Kind              string `json:"kind"`
	SiteID            string `json:"site_id,omitempty"`
	Link              string `json:"link,omitempty"` // the short code
	Domain            string `json:"domain,omitempty"`
	PasswordProtected bool   `json:"password_protected"`
	CreatedAt         string `json:"created_at"`
	URL               string `json:"url,omitempty"`
}

func newShareView(sh *store.Share) ShareView {
	v := ShareView{ID: sh.ID, Name: sh.Name, Kind: sh.Kind.String(), PasswordProtected: sh.PasswordHash != "", CreatedAt: formatMillis(sh.CreatedAt)}
	if sh.Kind == store.ShareSite {
		v.SiteID = sh.Target
	} else {
		v.Domain, v.Link = store.SplitLinkID(sh.Target)
	}
	return v
}

// ShareRequest is the body of POST .../shares; both fields are optional.
type ShareRequest struct {
	Name     *string `json:"name"`
	Password *string `json:"password"`
}

func decodeShareRequest(raw []byte) (name, password string, err error) {
	var req ShareRequest
	if len(bytes.TrimSpace(raw)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			return "", "", fmt.Errorf(`the body must be a JSON object {"name"?: "...", "password"?: "..."}: %v`, err)
		}
		if dec.More() {
			return "", "", errors.New("the body must be one JSON object")
		}
	}
	if req.Name != nil {
		name = strings.TrimSpace(*req.Name)
		if len(name) > store.MaxShareNameLen || strings.ContainsAny(name, "\x00\r\n") {
			return "", "", fmt.Errorf(`"name" is at most %d bytes on one line`, store.MaxShareNameLen)
		}
	}
	if req.Password != nil {
		password = *req.Password
		if password == "" || len(password) > MaxPasswordLen {
			return "", "", fmt.Errorf(`"password" is 1 to %d bytes (leave it out for a share without one)`, MaxPasswordLen)
		}
	}
	return name, password, nil
}

func (s *Server) createShare(ctx *fasthttp.RequestCtx, owner store.Owner, t shareTarget) {
	raw, ok := readBody(ctx)
	if !ok {
		return
	}
	name, password, err := decodeShareRequest(raw)
	if err != nil {
		writeProblem(ctx, probInvalidRequest, err.Error())
		return
	}
	target, ok := s.ownedShareTarget(ctx, owner, t)
	if !ok {
		return
	}
	sw, ok := s.w.(ShareWriter)
	if !ok {
		writeRetryProblem(ctx, probUnavailable, "this node cannot make shares", 30)
		return
	}
	var hash string
	if password != "" {
		if hash, ok = s.hashForAPI(ctx, password); !ok { // password.go: the links' argon2id
			return
		}
	}
	wctx, cancel := s.writeContext(ctx)
	defer cancel()
	for attempt := 1; ; attempt++ {
		text, tok, err := NewShareToken()
		if err != nil {
			s.log.Error("cannot generate share token", "err", err)
			writeProblem(ctx, probInternal, "the share could not be made")
			return
		}
		sh, err := sw.CreateShare(wctx, &store.Share{Hash: store.HashShareToken(tok), Owner: owner.ID, Kind: t.kind, Target: target,
			Name: name, PasswordHash: hash, CreatedAt: s.now().UnixMilli()})
		if errors.Is(err, store.ErrShareIDTaken) && attempt < newShareAttempts {
			continue
		}
		if errors.Is(err, store.ErrTooManyShares) {
			writeProblem(ctx, probInvalidRequest, fmt.Sprintf("this %s has %d shares already; revoke one first", t.kind, store.MaxSharesPerTarget))
			return
		}
		if err != nil {
			s.writeWriteError(ctx, "share", err)
			return
		}
		s.shares.m.created.Inc()
		v := newShareView(&sh)
		v.URL = s.publicBase + sharePrefix + text
		ctx.Response.Header.Set("Location", s.publicBase+string(ctx.Path())+"/"+sh.ID)
		writeJSON(ctx, fasthttp.StatusCreated, marshalJSON(v))
		return
	}
}

func (s *Server) listShares(ctx *fasthttp.RequestCtx, owner store.Owner, t shareTarget) {
	target, ok := s.ownedShareTarget(ctx, owner, t)
	if !ok {
		return
	}
	list, err := s.st.Shares(t.kind, target)
	if err != nil {
		s.log.Error("cannot list shares", "target", target, "err", err)
		writeProblem(ctx, probInternal, "the shares could not be listed")
		return
	}
	out := struct {
		Shares []ShareView `json:"shares"`
	}{Shares: make([]ShareView, 0, len(list))}
	for i := range list {
		if list[i].Owner == owner.ID {
			out.Shares = append(out.Shares, newShareView(&list[i]))
		}
	}
	writeJSON(ctx, fasthttp.StatusOK, marshalJSON(out))
}

func (s *Server) deleteShare(ctx *fasthttp.RequestCtx, owner store.Owner, t shareTarget) {
	target, ok := s.ownedShareTarget(ctx, owner, t)
	if !ok {
		return
	}
	sw, ok := s.w.(ShareWriter)
	if !ok {
		writeRetryProblem(ctx, probUnavailable, "this node cannot revoke shares", 30)
		return
	}
	wctx, cancel := s.writeContext(ctx)
	defer cancel()
	err := sw.DeleteShare(wctx, owner.ID, t.kind, target, t.sub)
	if errors.Is(err, store.ErrNotFound) {
		writeProblem(ctx, probNotFound, fmt.Sprintf("there is no share %q", t.sub))
		return
	}
	if err != nil {
		s.writeWriteError(ctx, "revocation", err)
		return
	}
	s.shares.m.revoked.Inc()
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}
