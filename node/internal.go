package node

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/edge/problem"
	"github.com/waymark/waymark/raft"
	"github.com/waymark/waymark/store"
)

// Internal node-to-node endpoints share the public port under /internal/.
// They answer only HTTPS clients with a certificate of the cluster CA
// (mtls.go) that also carry a token derived from the cluster key, so only
// members of the same cluster can call them.
const (
	internalApply      = "/internal/v1/apply"
	internalStatus     = "/internal/v1/status"
	internalLink       = "/internal/v1/link"
	internalOwner      = "/internal/v1/owner"
	internalMembership = "/internal/v1/membership"
	internalSegments   = "/internal/v1/segments"
)

// deriveKey derives a purpose-specific secret from the cluster key.
func deriveKey(clusterKey []byte, purpose string) []byte {
	m := hmac.New(sha256.New, clusterKey)
	m.Write([]byte("waymark/" + purpose))
	return m.Sum(nil)
}

// internalToken is the bearer token nodes present to each other.
func internalToken(clusterKey []byte) string {
	return hex.EncodeToString(deriveKey(clusterKey, "internal-v1"))
}

// requireInternal wraps an internal handler with the cluster token check.
func (n *Node) requireInternal(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	want := []byte("Bearer " + n.internalToken)
	return requirePeer(func(ctx *fasthttp.RequestCtx) {
		if subtle.ConstantTimeCompare(ctx.Request.Header.Peek("Authorization"), want) != 1 {
			problem.Write(ctx, problem.Unauthorized, "wrong cluster token")
			return
		}
		h(ctx)
	})
}

// internalRoutes are mounted on the public port.
func (n *Node) internalRoutes() map[string]fasthttp.RequestHandler {
	return map[string]fasthttp.RequestHandler{
		internalApply:      n.requireInternal(n.handleApply),
		internalStatus:     n.requireInternal(n.handleInternalStatus),
		internalLink:       n.requireInternal(n.handleInternalLink),
		internalOwner:      n.requireInternal(n.handleInternalOwner),
		internalMembership: n.requireInternal(n.handleMembership),
		internalKey:        n.requireInternal(n.handleInternalKey),
	}
}

// handleApply is the leader side of write forwarding.
func (n *Node) handleApply(ctx *fasthttp.RequestCtx) {
	if !ctx.IsPost() {
		ctx.Response.Header.Set("Allow", "POST")
		problem.Write(ctx, problem.MethodNotAllowed, "POST only")
		return
	}
	// A leader on a full disk takes no new entries: refused before Raft,
	// the command certainly had no effect.
	if err := n.disk.writable(); err != nil {
		problem.WriteRetry(ctx, problem.StorageFull, err.Error(), 5)
		return
	}
	cmd := append([]byte(nil), ctx.PostBody()...)
	// The forwarding node granted this much; ending first leaves room for
	// the answer to reach it before its own deadline.
	timeout := raft.ParseLeaderTimeout(ctx.Request.Header.Peek(raft.LeaderTimeoutHeader), n.cfg.ApplyTimeout)
	c, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := n.raft.ApplyForwarded(c, cmd)
	if errors.Is(err, store.ErrCorrupt) {
		problem.Write(ctx, problem.InvalidRequest, err.Error())
		return
	}
	if err != nil {
		// Transport-level failure of the leader itself; the forwarding
		// side reports it as an unknown outcome.
		problem.Write(ctx, problem.Unavailable, err.Error())
		return
	}
	ctx.SetContentType("application/octet-stream")
	ctx.SetBody(res)
}

// InternalStatus is what a node tells the leader's reconciler.
type InternalStatus struct {
	Name         string `json:"name"`
	AppliedIndex uint64 `json:"applied_index"`
	CommitIndex  uint64 `json:"commit_index"`
	Ready        bool   `json:"ready"`
}

func (n *Node) handleInternalStatus(ctx *fasthttp.RequestCtx) {
	st := n.raft.Stats()
	b, _ := json.Marshal(InternalStatus{Name: n.cfg.Name, AppliedIndex: st.StoreAppliedIndex, CommitIndex: st.CommitIndex, Ready: st.Ready})
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

// handleInternalLink answers read-your-writes lookups from nodes that have
// not applied a code yet: the encoded link, or 404.
func (n *Node) handleInternalLink(ctx *fasthttp.RequestCtx) {
	code := ctx.QueryArgs().Peek("code")
	var l store.Link
	n.metrics.GetOrCreateCounter(`waymark_internal_lookups_total{kind="link"}`).Inc()
	found, err := n.store.GetLink(code, &l)
	if err != nil {
		problem.Write(ctx, problem.Internal, err.Error())
		return
	}
	if !found {
		problem.Write(ctx, problem.NotFound, "no such code")
		return
	}
	ctx.SetContentType("application/octet-stream")
	ctx.SetBody(store.AppendLink(nil, &l))
}

// peerClient calls other nodes' internal endpoints.
type peerClient struct {
	token string
	http  *http.Client
}

// peerMaxConnsPerHost bounds the connections to one peer. Forwarded writes
// use most (one per concurrent write); the edge's lookups are limited to
// a few in flight on their own.
const peerMaxConnsPerHost = 256

func newPeerClient(token string, tlsCfg *tls.Config) *peerClient {
	return &peerClient{token: token, http: &http.Client{
		Timeout:   10 * time.Second,
		Transport: peerTransport(tlsCfg),
	}}
}

// errPeerNotReached means the request never reached the peer, so it had
// no effect there.
var errPeerNotReached = errors.New("peer not reached")

// do POSTs (or GETs when body is nil) to a peer and returns the body of a
// 2xx answer. hdr holds extra header name/value pairs.
func (c *peerClient) do(ctx context.Context, httpAddr, path string, body []byte, hdr ...string) ([]byte, int, error) {
	method := http.MethodGet
	var rd io.Reader
	if body != nil {
		method = http.MethodPost
		rd = strings.NewReader(string(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, "https://"+httpAddr+path, rd)
	if err != nil {
		return nil, 0, fmt.Errorf("cannot build request to %s: %w", httpAddr, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return nil, 0, fmt.Errorf("cannot reach %s: %w: %w", httpAddr, errPeerNotReached, err)
		}
		// A refused TLS handshake (either side's certificate) means no
		// request was served.
		var cv *tls.CertificateVerificationError
		if errors.As(err, &cv) || (errors.As(err, &op) && op.Op == "remote error") {
			return nil, 0, fmt.Errorf("cannot reach %s over mutual TLS: %w: %w", httpAddr, errPeerNotReached, err)
		}
		return nil, 0, fmt.Errorf("cannot call %s%s: %w", httpAddr, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("cannot read answer from %s: %w", httpAddr, err)
	}
	if resp.StatusCode/100 != 2 {
		return b, resp.StatusCode, fmt.Errorf("%s%s answered %s: %s", httpAddr, path, resp.Status, strings.TrimSpace(string(b)))
	}
	return b, resp.StatusCode, nil
}

// httpAddrOf finds a member's public address by its name (= raft ID).
func (n *Node) httpAddrOf(name string) (string, bool) {
	if name == n.cfg.Name {
		return n.HTTPAddr(), true
	}
	if n.gossip == nil {
		return "", false
	}
	for _, m := range n.gossip.Members() {
		if m.Name == name && m.HTTPAddr != "" {
			return m.HTTPAddr, true
		}
	}
	return "", false
}

// forward sends a write to the leader (raft.Config.Forward).
func (n *Node) forward(ctx context.Context, leaderID, _ string, cmd []byte) ([]byte, error) {
	addr, ok := n.httpAddrOf(leaderID)
	if !ok {
		return nil, fmt.Errorf("cannot forward to leader %q: address unknown to gossip: %w", leaderID, store.ErrNoLeader)
	}
	var hdr []string
	if d, ok := raft.LeaderTimeout(ctx); ok {
		hdr = []string{raft.LeaderTimeoutHeader, raft.FormatLeaderTimeout(d)}
	}
	b, status, err := n.peers.do(ctx, addr, internalApply, cmd, hdr...)
	switch {
	case err == nil:
		return b, nil
	case errors.Is(err, errPeerNotReached):
		return nil, fmt.Errorf("%w: %w", store.ErrNoLeader, err)
	case status == http.StatusBadRequest, status == http.StatusRequestEntityTooLarge:
		// The leader refused the command before its log: it had no effect.
		return nil, fmt.Errorf("cannot forward to leader %q: %w: %w", leaderID, store.ErrRefused, err)
	case status == http.StatusUnauthorized:
		return nil, fmt.Errorf("cannot forward to leader %q: %w: %w", leaderID, store.ErrClusterKeyMismatch, err)
	default:
		return nil, fmt.Errorf("%w: %w", store.ErrUnknownOutcome, err)
	}
}

// askLeader GETs an internal lookup from the leader. found is false when
// this node is the leader, no leader is known, or the leader answers 404.
func (n *Node) askLeader(ctx context.Context, path string) (body []byte, found bool, err error) {
	leader := n.raft.LeaderID()
	if leader == "" || leader == n.cfg.Name {
		return nil, false, nil
	}
	addr, ok := n.httpAddrOf(leader)
	if !ok {
		return nil, false, nil
	}
	b, status, err := n.peers.do(ctx, addr, path, nil)
	if status == http.StatusNotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return b, true, nil
}

// remoteLink asks the leader for a code this node has not applied yet.
func (n *Node) remoteLink(ctx context.Context, code string) (store.Link, bool, error) {
	var l store.Link
	b, found, err := n.askLeader(ctx, internalLink+"?code="+url.QueryEscape(code))
	if err != nil || !found {
		return l, false, err
	}
	if err := store.DecodeLink(b, &l); err != nil {
		return l, false, err
	}
	return l, true, nil
}

func (n *Node) handleMembership(ctx *fasthttp.RequestCtx) {
	var req MembershipRequest
	if err := json.Unmarshal(ctx.PostBody(), &req); err != nil {
		problem.Write(ctx, problem.InvalidRequest, "bad membership request: "+err.Error())
		return
	}
	if !n.raft.IsLeader() {
		problem.Write(ctx, problem.Unavailable, "not the leader")
		return
	}
	if err := n.applyMembership(req); err != nil {
		name := problem.Internal
		if errors.Is(err, errUnknownPeer) {
			name = problem.NotFound
		}
		problem.Write(ctx, name, err.Error())
		return
	}
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

// handleInternalOwner resolves an API-key hash (hex) for nodes that have
// not applied a fresh owner yet. Nodes of this version ask
// /internal/v1/key (keys.go), which carries the key's scopes; this one
// stays for older nodes during a rolling upgrade.
func (n *Node) handleInternalOwner(ctx *fasthttp.RequestCtx) {
	h, ok := queryKeyHash(ctx)
	if !ok {
		return
	}
	n.metrics.GetOrCreateCounter(`waymark_internal_lookups_total{kind="owner"}`).Inc()
	o, found, err := n.store.OwnerByKey(h)
	if err != nil {
		problem.Write(ctx, problem.Internal, err.Error())
		return
	}
	if !found {
		problem.Write(ctx, problem.NotFound, "no such key")
		return
	}
	ctx.SetContentType("application/octet-stream")
	ctx.SetBody(store.AppendOwner(nil, &o))
}

// queryKeyHash reads the ?hash= (hex) of an internal key lookup, or
// answers 400.
func queryKeyHash(ctx *fasthttp.RequestCtx) (store.KeyHash, bool) {
	var h store.KeyHash
	raw, err := hex.DecodeString(string(ctx.QueryArgs().Peek("hash")))
	if err != nil || len(raw) != len(h) {
		problem.Write(ctx, problem.InvalidRequest, "bad key hash")
		return h, false
	}
	copy(h[:], raw)
	return h, true
}
