package node

import (
	"context"
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/edge"
	"github.com/waymark/waymark/rollup/api"
	"github.com/waymark/waymark/store"
)

// Shared dashboards (issue 13 point 6). The edge checks a share's token,
// target and password cookie on the node the viewer reaches; the stats
// reads it allows are answered here on an aggregator, and proxied
// unchanged to the aggregator elsewhere, where that node's edge checks the
// share again against its own replica (so a revocation holds there as
// soon as it is applied there, and a request sent straight to the
// aggregator's public port gets no further than anywhere else).

// shareConfig is the edge's ShareConfig for this node.
func (n *Node) shareConfig() edge.ShareConfig {
	return edge.ShareConfig{
		Page: api.DashboardHandler(),
		// Every node derives the same key from the cluster key, so a
		// cookie set by one node opens the share on any other.
		CookieKey: deriveKey([]byte(n.internalToken), "share-cookie-v1"),
		Stats:     n.shareStats(),
	}
}

func (n *Node) shareStats() func(*fasthttp.RequestCtx, edge.ShareGrant) {
	if n.agg == nil {
		proxy := n.statsHandler() // forwards the request as it came: /share/{token}/v1/...
		return func(ctx *fasthttp.RequestCtx, _ edge.ShareGrant) { proxy(ctx) }
	}
	cfg := api.Config{Now: time.Now, Logger: n.log}
	return func(ctx *fasthttp.RequestCtx, g edge.ShareGrant) {
		grant := api.Grant{Owner: g.Share.Owner}
		if g.Share.Kind == store.ShareSite {
			grant.Site = g.Share.Target
		} else {
			grant.Link = g.Code
		}
		api.GrantHandler(n.agg, authorizer{n: n, domain: g.Domain}, cfg)(ctx, grant, g.APIPath)
	}
}

// CreateShare and DeleteShare let the edge make and revoke shares through
// the disk guard, as its other writes.
func (w guardedWriter) CreateShare(ctx context.Context, s *store.Share) (store.Share, error) {
	sw, ok := w.Writer.(edge.ShareWriter)
	if !ok {
		return store.Share{}, errors.New("BUG: the node's writer cannot make shares")
	}
	if err := w.g.writable(); err != nil {
		return store.Share{}, err
	}
	got, err := sw.CreateShare(ctx, s)
	w.g.noteErr(err)
	return got, err
}

func (w guardedWriter) DeleteShare(ctx context.Context, owner string, kind store.ShareKind, target, id string) error {
	sw, ok := w.Writer.(edge.ShareWriter)
	if !ok {
		return errors.New("BUG: the node's writer cannot revoke shares")
	}
	// A revocation is let through on a full disk, as a takedown is: it
	// takes access away.
	err := sw.DeleteShare(ctx, owner, kind, target, id)
	w.g.noteErr(err)
	return err
}
