package edge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/store"
)

// Custom domains (issue 12): the owner API (POST/GET /v1/domains, DELETE
// /v1/domains/{domain}), the "domain" of a link on create and the
// ?domain= of the link routes, and the Host routing of redirects.

// DomainWriter is what the server needs to change custom domains; the
// node's writer implements it (raft.Node.UpdateDomain through the disk
// guard). Without it /v1/domains answers 404.
type DomainWriter interface {
	UpdateDomain(ctx context.Context, ch *store.DomainChange) (store.Domain, uint64, error)
}

const domainsPath = "/v1/domains"

// domainView is a custom domain as the API shows it.
type domainView struct {
	Domain     string  `json:"domain"`
	Status     string  `json:"status"`
	CreatedAt  string  `json:"created_at"`
	ApprovedAt *string `json:"approved_at"`
	UpdatedAt  string  `json:"updated_at"`
}

func newDomainView(d *store.Domain) domainView {
	v := domainView{Domain: d.Name, Status: d.Status.String(), CreatedAt: formatMillis(d.CreatedAt), UpdatedAt: formatMillis(d.UpdatedAt)}
	if d.ApprovedAt != 0 {
		t := formatMillis(d.ApprovedAt)
		v.ApprovedAt = &t
	}
	return v
}

// NewDomainView is the JSON view of a domain, for the operator API.
func NewDomainView(d *store.Domain) any { return newDomainView(d) }

// IsPublicHost reports whether a canonical domain is the cluster's public
// host (the default domain) or a listen name of this node.
func (s *Server) IsPublicHost(name string) bool {
	_, own := s.ownNames[name]
	return name == s.ownHost || own
}

// dispatchDomains routes /v1/domains and /v1/domains/{domain}.
func (s *Server) dispatchDomains(ctx *fasthttp.RequestCtx, path, method string) (string, bool) {
	switch {
	case path == domainsPath:
		switch method {
		case fasthttp.MethodPost:
			s.withOwner(ctx, true, s.registerDomain)
			return "domains.create", true
		case fasthttp.MethodGet:
			s.withOwner(ctx, false, s.listDomains)
			return "domains.list", true
		}
		methodNotAllowed(ctx, "GET, POST")
		return "domains", true
	case strings.HasPrefix(path, domainsPath+"/") && strings.IndexByte(path[len(domainsPath)+1:], '/') < 0:
		name := path[len(domainsPath)+1:]
		if method != fasthttp.MethodDelete {
			methodNotAllowed(ctx, "DELETE")
			return "domain", true
		}
		s.withOwner(ctx, true, func(ctx *fasthttp.RequestCtx, o store.Owner) { s.deleteDomain(ctx, o, name) })
		return "domains.delete", true
	}
	return "", false
}

// parseDomain checks a domain the client sent, answering the problem
// itself when it is refused. The cluster's own public host is refused:
// it is the default domain already.
func (s *Server) parseDomain(ctx *fasthttp.RequestCtx, raw string) (string, bool) {
	name, r := s.checkDomain(raw)
	return name, r.write(ctx)
}

// refusal is a problem an answer carries (a problem type and its
// detail), for checks that also serve a bulk item, whose problem goes in
// its own result rather than in the answer. nil: no refusal.
type refusal struct{ prob, detail string }

// write answers r as the request's problem; it reports whether there was
// none.
func (r *refusal) write(ctx *fasthttp.RequestCtx) bool {
	if r == nil {
		return true
	}
	writeProblem(ctx, r.prob, r.detail)
	return false
}

// checkDomain canonicalises a custom domain name, refusing this service's
// own names.
func (s *Server) checkDomain(raw string) (string, *refusal) {
	name, err := store.ParseDomainName(raw)
	if err != nil {
		return "", &refusal{probInvalidDomain, err.Error()}
	}
	if name == s.ownHost {
		return "", &refusal{probInvalidDomain, fmt.Sprintf("domain %q is this cluster's own public host, the default domain of every link; omit \"domain\" to use it", name)}
	}
	if _, own := s.ownNames[name]; own {
		return "", &refusal{probInvalidDomain, fmt.Sprintf("domain %q is a listen address of this service", name)}
	}
	return name, nil
}

func (s *Server) domainWriter(ctx *fasthttp.RequestCtx) (DomainWriter, bool) {
	dw, ok := s.w.(DomainWriter)
	if !ok {
		writeProblem(ctx, probNotFound, "custom domains are not available on this node")
	}
	return dw, ok
}

func (s *Server) registerDomain(ctx *fasthttp.RequestCtx, owner store.Owner) {
	dw, ok := s.domainWriter(ctx)
	if !ok {
		return
	}
	raw, ok := readBody(ctx)
	if !ok {
		return
	}
	o, err := decodeObject(raw, []string{"domain"})
	if err != nil {
		writeProblem(ctx, probInvalidRequest, err.Error())
		return
	}
	v, st, err := o.str("domain")
	if err != nil {
		writeProblem(ctx, probInvalidRequest, err.Error())
		return
	}
	if st != fieldSet {
		writeProblem(ctx, probInvalidRequest, `field "domain" is required`)
		return
	}
	name, ok := s.parseDomain(ctx, v)
	if !ok {
		return
	}
	// Already ours: answer it as it is, without a write.
	if d, found, err := s.st.Domain(name); err == nil && found && d.Owner == owner.ID && d.Status != store.DomainDeleted {
		writeJSON(ctx, fasthttp.StatusOK, marshalJSON(newDomainView(&d)))
		return
	}
	wctx, cancel := s.writeContext(ctx)
	defer cancel()
	d, index, err := dw.UpdateDomain(wctx, &store.DomainChange{Op: store.DomainRegister, Name: name, Owner: owner.ID, At: s.now().UnixMilli()})
	switch {
	case errors.Is(err, store.ErrDomainTaken):
		writeProblem(ctx, probDomainTaken, fmt.Sprintf("domain %q is registered to another owner", name))
		return
	case err != nil:
		s.writeWriteError(ctx, "domain registration", err)
		return
	}
	setIndex(ctx, index)
	ctx.Response.Header.Set("Location", s.publicBase+domainsPath+"/"+d.Name)
	writeJSON(ctx, fasthttp.StatusCreated, marshalJSON(newDomainView(&d)))
}

func (s *Server) listDomains(ctx *fasthttp.RequestCtx, owner store.Owner) {
	ds, err := s.st.OwnerDomains(owner.ID)
	if err != nil {
		s.log.Error("cannot list domains", "owner", owner.ID, "err", err)
		writeProblem(ctx, probInternal, "the domains could not be listed")
		return
	}
	out := struct {
		Domains []domainView `json:"domains"`
	}{Domains: make([]domainView, 0, len(ds))}
	for i := range ds {
		out.Domains = append(out.Domains, newDomainView(&ds[i]))
	}
	writeJSON(ctx, fasthttp.StatusOK, marshalJSON(out))
}

func (s *Server) deleteDomain(ctx *fasthttp.RequestCtx, owner store.Owner, raw string) {
	dw, ok := s.domainWriter(ctx)
	if !ok {
		return
	}
	name, err := store.ParseDomainName(raw)
	if err != nil {
		writeProblem(ctx, probNotFound, fmt.Sprintf("there is no domain %q", raw))
		return
	}
	wctx, cancel := s.writeContext(ctx)
	defer cancel()
	_, index, err := dw.UpdateDomain(wctx, &store.DomainChange{Op: store.DomainDelete, Name: name, Owner: owner.ID, At: s.now().UnixMilli()})
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeProblem(ctx, probNotFound, fmt.Sprintf("there is no domain %q", name))
		return
	case err != nil:
		s.writeWriteError(ctx, "domain deletion", err)
		return
	}
	setIndex(ctx, index)
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

// linkDomain resolves the "domain" of a create: "" (absent, or the
// public host) is the default domain; any other must be approved and the
// caller's. The FSM checks the same again against the state the create
// commits on.
func (s *Server) linkDomain(ctx *fasthttp.RequestCtx, owner store.Owner, raw string) (string, bool) {
	name, r := s.resolveLinkDomain(owner.ID, raw)
	return name, r.write(ctx)
}

// resolveLinkDomain is linkDomain's check, for a create or a bulk item.
func (s *Server) resolveLinkDomain(owner, raw string) (string, *refusal) {
	if raw == "" {
		return "", nil
	}
	if n, err := store.ParseDomainName(raw); err == nil && n == s.ownHost {
		return "", nil
	}
	name, r := s.checkDomain(raw)
	if r != nil {
		return "", r
	}
	d, found, err := s.st.Domain(name)
	if err != nil {
		s.log.Error("cannot read domain", "domain", name, "err", err)
		return "", &refusal{probInternal, "the domain could not be checked"}
	}
	switch {
	case !found || d.Owner != owner || d.Status == store.DomainDeleted:
		return "", &refusal{probDomainForbidden, fmt.Sprintf("domain %q is not registered to you; register it with POST /v1/domains", name)}
	case d.Status != store.DomainApproved:
		return "", &refusal{probDomainNotApproved, fmt.Sprintf("domain %q is waiting for an operator's approval", name)}
	}
	return name, nil
}

// writeDomainRefusal answers the FSM's own refusal of a create on a
// domain (it changed between the edge's check and the commit).
func (s *Server) writeDomainRefusal(ctx *fasthttp.RequestCtx, name string, err error) bool {
	switch {
	case errors.Is(err, store.ErrDomainNotOwned):
		writeProblem(ctx, probDomainForbidden, fmt.Sprintf("domain %q is not registered to you", name))
	case errors.Is(err, store.ErrDomainNotApproved):
		writeProblem(ctx, probDomainNotApproved, fmt.Sprintf("domain %q is waiting for an operator's approval", name))
	default:
		return false
	}
	return true
}

// reportedDomainCode reads a report's url as a short URL on an approved
// custom domain (any scheme and port; query and fragment ignored): its
// link identifier "domain/code".
func (s *Server) reportedDomainCode(target string) (string, bool) {
	raw := strings.TrimSpace(target)
	if !strings.Contains(raw, "://") {
		raw = "https://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.Opaque != "" {
		return "", false
	}
	name, err := store.ParseDomainName(u.Hostname())
	if err != nil {
		return "", false
	}
	if _, ok := s.st.ApprovedDomains().Owner([]byte(name)); !ok {
		return "", false
	}
	code, ok := strings.CutPrefix(u.Path, "/")
	if !ok || !validCodeSyntax(code) {
		return "", false
	}
	return store.LinkID(name, code), true
}

// queryDomain reads ?domain= of the /v1/links/{code} routes: "" for the
// default domain (absent, or the public host). ok is false for a name
// that cannot be a domain, which no link can be on.
func (s *Server) queryDomain(ctx *fasthttp.RequestCtx) (string, bool) {
	raw := ctx.QueryArgs().Peek("domain")
	if len(raw) == 0 {
		return "", true
	}
	name, err := store.ParseDomainName(string(raw))
	if err != nil {
		return "", false
	}
	if name == s.ownHost {
		return "", true
	}
	return name, true
}

// shortURL is a link's short URL: the public URL for a default-domain
// link, its domain with the public URL's scheme otherwise.
func (s *Server) shortURL(l *store.Link) string {
	domain, code := store.SplitLinkID(l.Code)
	if domain == "" {
		return s.publicBase + "/" + code
	}
	return s.publicScheme + "://" + domain + "/" + code
}

// Host routing of redirects. A request whose Host is the public host, or
// one that can never be a custom domain (an IP literal, a single label
// such as localhost), or one of the node's listen names, is on the
// default domain, so a node answers by its address as before; an approved
// custom domain looks its code up as "domain/code"; any other host
// answers the unknown-host page.

type hostRoute uint8

const (
	hostDefault hostRoute = iota
	hostCustom
	hostUnknown
)

// hostKeyBuf holds one request's "domain/code" key: reused through a
// pool, so the lookup allocates nothing (a stack buffer would escape
// through the click hook).
type hostKeyBuf struct {
	b [store.MaxDomainLen + 2 + maxAliasLen]byte
}

var hostKeyPool = sync.Pool{New: func() any { return new(hostKeyBuf) }}

// normalHost appends the Host header lower-cased, without its port and
// one trailing dot. An IPv6 literal keeps its brackets.
func normalHost(dst, h []byte) []byte {
	if len(h) > 0 && h[0] == '[' {
		return append(dst, '[')
	}
	for _, c := range h {
		if c == ':' {
			break
		}
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	if n := len(dst); n > 0 && dst[n-1] == '.' {
		dst = dst[:n-1]
	}
	return dst
}

// routeHost classifies a host as normalHost wrote it.
func (s *Server) routeHost(host []byte) hostRoute {
	if len(host) == 0 || string(host) == s.ownHost || host[0] == '[' || bytes.IndexByte(host, '.') < 0 || lastLabelNumeric(host) {
		return hostDefault // the public host, or one no custom domain can be
	}
	if _, ok := s.st.ApprovedDomains().Owner(host); ok {
		return hostCustom
	}
	if _, ok := s.ownNames[string(host)]; ok {
		return hostDefault
	}
	return hostUnknown
}

// lastLabelNumeric: the host is an IPv4 address (a top-level domain is
// never all digits).
func lastLabelNumeric(h []byte) bool {
	i := len(h)
	for i > 0 && h[i-1] != '.' {
		c := h[i-1]
		if c < '0' || c > '9' {
			return false
		}
		i--
	}
	return i < len(h)
}

// serveHostCode answers GET and HEAD /{code} on whatever Host it came.
// The host is classified in a stack buffer; only a custom domain's key,
// which the click hook sees, goes through the pool.
func (s *Server) serveHostCode(ctx *fasthttp.RequestCtx, code []byte) {
	raw := ctx.Host()
	if len(raw) == 0 || string(raw) == s.ownHost || (s.ownOrigin != "" && string(raw) == s.ownOrigin) {
		s.serveCode(ctx, code) // the public host as clients send it: no normalising
		return
	}
	var hb [store.MaxDomainLen + 1]byte
	host := normalHost(hb[:0], raw[:min(len(raw), len(hb))])
	switch s.routeHost(host) {
	case hostDefault:
		s.serveCode(ctx, code)
	case hostCustom:
		buf := hostKeyPool.Get().(*hostKeyBuf)
		key := append(append(append(buf.b[:0], host...), '/'), code...)
		s.serveCode(ctx, key)
		hostKeyPool.Put(buf)
	default:
		if !ctx.IsGet() && !ctx.IsHead() {
			ctx.Response.Header.Set("Allow", "GET, HEAD")
			writePage(ctx, fasthttp.StatusMethodNotAllowed, pageMethod)
			return
		}
		s.m.unknownHost.Inc()
		writePage(ctx, fasthttp.StatusNotFound, pageUnknownHost)
	}
}
