package node

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/edge/problem"
	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/api"
	"github.com/waymark/waymark/store"
)

// Stats requests reach every node, so users need one address; the
// aggregator answers them. A node that is not an aggregator proxies the
// request unchanged to the aggregator it ships to.

// authorizer lets the aggregator scope stats to owners, from this node's
// replica (with the read-your-writes fallback for fresh keys and links).
type authorizer struct {
	n      *Node
	domain string // ?domain= of a link stats request: the link is "domain/code"
}

// Owner and Link go through the edge's lookups, so a fresh key or link is
// found at the leader within the same limits as on the public routes: a
// stream of random tokens or codes on the stats API cannot turn into a
// stream of leader lookups.
func (a authorizer) Owner(apiKey []byte) (string, bool) {
	srv := a.n.edge.Load()
	if srv == nil {
		return "", false
	}
	o, found, err := srv.LookupOwner(store.HashAPIKey(apiKey))
	if err != nil || !found {
		return "", false
	}
	return o.ID, true
}

func (a authorizer) Link(code string) (store.Link, bool) {
	srv := a.n.edge.Load()
	if srv == nil {
		return store.Link{}, false
	}
	// The stats path's code has no '/' (the path is split on it); the
	// click-limit check passes the click's identifier, "domain/code" on a
	// custom domain, with no domain here.
	l, found, err := srv.LookupLink(store.LinkID(a.domain, code))
	return l, err == nil && found
}

func (a authorizer) Site(id string) (store.Site, bool) {
	s, found, err := a.n.store.Site(id)
	return s, err == nil && found
}

func (a authorizer) SiteByDomain(domain string) (store.Site, bool) {
	s, ok := a.n.sites.Lookup(domain)
	return s, ok
}

// isStatsPath reports whether an API path is a stats read.
func isStatsPath(path string) bool {
	return (strings.HasPrefix(path, "/v1/links/") || strings.HasPrefix(path, "/v1/sites/")) && strings.Contains(path, "/stats")
}

// statsHandler answers stats locally on an aggregator, or proxies them.
func (n *Node) statsHandler() fasthttp.RequestHandler {
	if b := n.analytics(); b != nil {
		cfg := api.Config{Now: time.Now, Logger: n.log}
		plain := api.StatsHandler(b, authorizer{n: n}, cfg)
		return func(ctx *fasthttp.RequestCtx) {
			// ?domain= names a link on a custom domain: its stats are
			// those of the identifier "domain/code" its clicks carry.
			raw := ctx.QueryArgs().Peek("domain")
			if len(raw) == 0 || !strings.HasPrefix(string(ctx.Path()), "/v1/links/") {
				plain(ctx)
				return
			}
			name, err := store.ParseDomainName(string(raw))
			if err != nil {
				problem.Write(ctx, "not-found", "no such link")
				return
			}
			if srv := n.edge.Load(); srv != nil && srv.IsPublicHost(name) {
				name = ""
			}
			api.StatsHandler(b, authorizer{n: n, domain: name}, cfg)(ctx)
		}
	}
	target := n.aggregatorURL()
	if target == "" {
		return n.proxyStatsToGossip()
	}
	u, err := url.Parse(target)
	if err != nil {
		return func(ctx *fasthttp.RequestCtx) {
			problem.Write(ctx, "unavailable", "bad --aggregator-url: "+err.Error())
		}
	}
	// The hop to the aggregator carries the caller's API key between
	// nodes: it goes over mutual TLS like every node-to-node call.
	client := &fasthttp.HostClient{Addr: u.Host, IsTLS: true, TLSConfig: n.peerTLS.clientConfig(),
		ReadTimeout: 30 * time.Second, WriteTimeout: 10 * time.Second, MaxConns: 64}
	export := n.exportProxy(u) // exportproxy.go: zips are streamed on, not buffered
	return func(ctx *fasthttp.RequestCtx) {
		if isExportPath(ctx.Path()) {
			export(ctx)
			return
		}
		req := fasthttp.AcquireRequest()
		defer fasthttp.ReleaseRequest(req)
		ctx.Request.CopyTo(req)
		req.SetHost(u.Host)
		req.URI().SetScheme("https")
		req.Header.Del("Connection")
		if err := client.DoTimeout(req, &ctx.Response, 30*time.Second); err != nil {
			ctx.Response.Reset()
			ctx.Response.Header.Set("Retry-After", "5")
			problem.Write(ctx, "unavailable", fmt.Sprintf("the aggregator at %s did not answer: %v", u.Host, err))
		}
	}
}

// apiFallback routes the /v1/ paths edge does not serve itself.
func (n *Node) apiFallback(stats fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if isStatsPath(string(ctx.Path())) {
			stats(ctx)
			return
		}
		problem.Write(ctx, "not-found", "there is no API endpoint at "+string(ctx.Path()))
	}
}

// onClickLimit takes a link whose click limit was reached out of service
// on every node, through the Raft log (an operator edit: no owner check).
func (n *Node) onClickLimit(code string) {
	var l store.Link
	if found, err := n.store.GetLink([]byte(code), &l); err != nil || !found || l.Status != store.StatusActive {
		return // already out of service, or an operator state that must stay
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
	defer cancel()
	// OnlyFrom: the FSM applies it only to a link still active, so a
	// takedown committed since the read above is never overwritten.
	_, err := n.raft.UpdateLink(ctx, &store.LinkPatch{
		Code: code, UpdatedAt: time.Now().UnixMilli(), SetStatus: true, Status: store.StatusLimited,
		OnlyFrom: store.MaskOf(store.StatusActive), Actor: store.ActorSystem, Reason: "click limit reached",
	})
	if errors.Is(err, store.ErrStatusChanged) {
		n.log.Info("click limit reached on a link no longer active; left as it is", "code", code, "err", err)
		return
	}
	if err != nil {
		n.log.Error("cannot apply click limit", "code", code, "err", err)
		return
	}
	n.log.Info("click limit reached; link disabled", "code", code)
}

// proxyStatsToGossip proxies stats to an aggregator gossip knows (a node
// without --aggregator-url ships to those too: shipTargets): the first
// alive one by name that answers. Any of them answers alike when they
// share ClickHouse; with the embedded store there is one.
func (n *Node) proxyStatsToGossip() fasthttp.RequestHandler {
	var mu sync.Mutex
	clients := map[string]*fasthttp.HostClient{}
	client := func(host string) *fasthttp.HostClient {
		mu.Lock()
		defer mu.Unlock()
		c := clients[host]
		if c == nil {
			c = &fasthttp.HostClient{Addr: host, IsTLS: true, TLSConfig: n.peerTLS.clientConfig(),
				ReadTimeout: 30 * time.Second, WriteTimeout: 10 * time.Second, MaxConns: 64}
			clients[host] = c
		}
		return c
	}
	return func(ctx *fasthttp.RequestCtx) {
		targets := n.shipTargets()
		slices.SortFunc(targets, func(a, b ingest.Aggregator) int { return strings.Compare(a.Name, b.Name) })
		var last error
		for _, a := range targets {
			u, err := url.Parse(a.URL)
			if !a.Alive || err != nil {
				continue
			}
			req := fasthttp.AcquireRequest()
			ctx.Request.CopyTo(req)
			req.SetHost(u.Host)
			req.URI().SetScheme("https")
			req.Header.Del("Connection")
			last = client(u.Host).DoTimeout(req, &ctx.Response, 30*time.Second)
			fasthttp.ReleaseRequest(req)
			if last == nil {
				return
			}
			ctx.Response.Reset()
		}
		ctx.Response.Header.Set("Retry-After", "5")
		if last != nil {
			problem.Write(ctx, "unavailable", fmt.Sprintf("no aggregator answered: %v", last))
			return
		}
		problem.Write(ctx, "unavailable", "no aggregator is configured for this node (--aggregator-url) or known through gossip")
	}
}
