package edge

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/store"
)

// GET /v1/links filters: ?tag= (one tag, through the tag index), ?q= (a
// case-insensitive substring of the destination URL or the code/alias),
// ?domain= (the link's domain), with ?limit= and the opaque ?cursor= of
// store.SearchLinks. Without a filter the listing is the plain one.

const maxSearchQ = 256

// servedDomain is the host a link is served on: its custom domain, or
// the cluster's --public-url host.
func (s *Server) servedDomain(l *store.Link) string {
	if d := l.Domain(); d != "" {
		return d
	}
	return s.ownHost
}

// parseLinkQuery reads the listing's query string, answering the problem
// itself when it is refused.
func (s *Server) parseLinkQuery(ctx *fasthttp.RequestCtx, owner string) (store.LinkQuery, bool) {
	args := ctx.QueryArgs()
	q := store.LinkQuery{Owner: owner, Limit: defaultListLimit, Cursor: string(args.Peek("cursor"))}
	if v := args.Peek("limit"); len(v) > 0 {
		n, err := strconv.Atoi(string(v))
		if err != nil || n < 1 || n > maxListLimit {
			writeProblem(ctx, probInvalidRequest, fmt.Sprintf("limit must be an integer from 1 to %d", maxListLimit))
			return q, false
		}
		q.Limit = n
	}
	for _, name := range []string{"tag", "q", "domain", "cursor", "limit"} {
		if len(args.PeekMulti(name)) > 1 {
			writeProblem(ctx, probInvalidRequest, fmt.Sprintf("parameter %q may be given once", name))
			return q, false
		}
	}
	if args.Has("tag") {
		q.Tag = strings.ToLower(string(args.Peek("tag")))
		if err := store.CheckTag(q.Tag); err != nil {
			writeProblem(ctx, probInvalidRequest, fmt.Sprintf("parameter \"tag\": %v", err))
			return q, false
		}
	}
	var matchers []func(*store.Link) bool
	if args.Has("q") {
		sub := strings.ToLower(string(args.Peek("q")))
		if sub == "" || len(sub) > maxSearchQ {
			writeProblem(ctx, probInvalidRequest, fmt.Sprintf("parameter \"q\" must be 1 to %d bytes", maxSearchQ))
			return q, false
		}
		matchers = append(matchers, func(l *store.Link) bool {
			return strings.Contains(strings.ToLower(l.URL), sub) || strings.Contains(strings.ToLower(l.Code), sub)
		})
	}
	if args.Has("domain") {
		domain := strings.TrimSuffix(strings.ToLower(string(args.Peek("domain"))), ".")
		if domain == "" || len(domain) > 253 || strings.ContainsAny(domain, "/:@ ") {
			writeProblem(ctx, probInvalidRequest, `parameter "domain" must be a host name such as go.example.com`)
			return q, false
		}
		if name, err := store.ParseDomainName(domain); err == nil {
			domain = name // the stored form: punycode for an international name
		}
		matchers = append(matchers, func(l *store.Link) bool { return s.servedDomain(l) == domain })
	}
	if len(matchers) > 0 {
		q.Match = func(l *store.Link) bool {
			for _, m := range matchers {
				if !m(l) {
					return false
				}
			}
			return true
		}
	}
	return q, true
}

func (s *Server) listLinks(ctx *fasthttp.RequestCtx, owner store.Owner) {
	q, ok := s.parseLinkQuery(ctx, owner.ID)
	if !ok {
		return
	}
	links, next, err := s.st.SearchLinks(q)
	if errors.Is(err, store.ErrCorrupt) && !errors.Is(err, store.ErrStorage) && q.Cursor != "" {
		writeProblem(ctx, probInvalidRequest, "cursor is not valid; use the next_cursor of a previous page")
		return
	}
	if err != nil {
		s.log.Error("cannot list links", "owner", owner.ID, "err", err)
		writeProblem(ctx, probInternal, "the links could not be listed")
		return
	}
	now := s.now()
	page := struct {
		Links      []linkView `json:"links"`
		NextCursor *string    `json:"next_cursor"`
	}{Links: make([]linkView, 0, len(links))}
	for i := range links {
		page.Links = append(page.Links, s.linkView(&links[i], now))
	}
	if next != "" {
		page.NextCursor = &next
	}
	writeJSON(ctx, fasthttp.StatusOK, marshalJSON(page))
}
