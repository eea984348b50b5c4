package edge

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/edge/problem"
	"github.com/waymark/waymark/store"
)

// The webhook API (issue 13 point 5), on the public port with an owner key:
//
//	POST   /v1/webhooks                   {"url", "events": [...]}: its signing secret is in this answer only
//	GET    /v1/webhooks                   the caller's webhooks (never their secrets)
//	GET    /v1/webhooks/{id}              one of them
//	DELETE /v1/webhooks/{id}              remove it (and its delivery log)
//	GET    /v1/webhooks/{id}/deliveries   recent attempts, newest first
//
// Another owner's webhook answers 404, exactly as a missing one. Delivery
// is the node's (node/webhooks.go); the event body is built here
// (WebhookEventBody) so it carries the API's own link object.
const (
	webhooksPath      = "/v1/webhooks"
	webhooksPrefix    = "/v1/webhooks/"
	deliveriesSuffix  = "/deliveries"
	maxDeliveriesShow = store.MaxDeliveryLog
)

// WebhookWriter is what the server needs to add and remove webhooks; the
// node's writer implements it. Without it the routes answer 503.
type WebhookWriter interface {
	CreateWebhook(ctx context.Context, w *store.Webhook) (store.Webhook, error)
	DeleteWebhook(ctx context.Context, owner, id string) error
}

// dispatchWebhooks routes the webhook endpoints and reports whether path
// was one.
func (s *Server) dispatchWebhooks(ctx *fasthttp.RequestCtx, path, method string) (string, bool) {
	if path == webhooksPath {
		switch method {
		case fasthttp.MethodPost:
			s.withOwnerKey(ctx, s.createWebhook)
			return "webhooks.create", true
		case fasthttp.MethodGet:
			s.withOwner(ctx, false, s.listWebhooks)
			return "webhooks.list", true
		}
		methodNotAllowed(ctx, "GET, POST")
		return "webhooks", true
	}
	rest, ok := strings.CutPrefix(path, webhooksPrefix)
	if !ok || rest == "" {
		return "", false
	}
	if id, ok := strings.CutSuffix(rest, deliveriesSuffix); ok && id != "" && strings.IndexByte(id, '/') < 0 {
		if method != fasthttp.MethodGet {
			methodNotAllowed(ctx, "GET")
			return "webhooks.deliveries", true
		}
		s.withOwner(ctx, false, func(ctx *fasthttp.RequestCtx, o store.Owner) { s.webhookDeliveries(ctx, o, id) })
		return "webhooks.deliveries", true
	}
	if strings.IndexByte(rest, '/') >= 0 {
		return "", false
	}
	switch method {
	case fasthttp.MethodGet:
		s.withOwner(ctx, false, func(ctx *fasthttp.RequestCtx, o store.Owner) { s.getWebhook(ctx, o, rest) })
		return "webhooks.get", true
	case fasthttp.MethodDelete:
		s.withOwner(ctx, true, func(ctx *fasthttp.RequestCtx, o store.Owner) { s.deleteWebhook(ctx, o, rest) })
		return "webhooks.delete", true
	}
	methodNotAllowed(ctx, "GET, DELETE")
	return "webhook", true
}

// webhookReadScopes are the scopes that read what events deliver: a
// webhook is a feed, so a key may only make one for data it could read
// itself (links:write alone must not become a way to read links).
func webhookReadScopes(events store.WebhookEvents) store.Scopes {
	need := store.ScopeLinksRead
	if events&store.EventLinkClicked != 0 {
		need |= store.ScopeStatsRead
	}
	return need
}

// WebhookView is a webhook as the API shows it; Secret only on create.
type WebhookView struct {
	ID        string   `json:"id"`
	URL       string   `json:"url"`
	Events    []string `json:"events"`
	CreatedAt string   `json:"created_at"`
	Secret    string   `json:"secret,omitempty"`
}

// NewWebhookView shows w without its secret.
func NewWebhookView(w *store.Webhook) WebhookView {
	return WebhookView{ID: w.ID, URL: w.URL, Events: w.Events.Names(), CreatedAt: formatMillis(w.CreatedAt)}
}

// WebhookRequest is the body of POST /v1/webhooks.
type WebhookRequest struct {
	URL    *string  `json:"url"`
	Events []string `json:"events"`
}

// DecodeWebhookRequest reads one WebhookRequest object without other
// fields and returns its URL (syntax checked, not yet its address) and
// events.
func DecodeWebhookRequest(raw []byte) (string, store.WebhookEvents, error) {
	var req WebhookRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return "", 0, fmt.Errorf(`the body must be a JSON object {"url": "https://...", "events": ["link.created", ...]}: %v`, err)
	}
	if dec.More() {
		return "", 0, errors.New("the body must be one JSON object")
	}
	if req.URL == nil {
		return "", 0, errors.New(`"url" is required`)
	}
	u := strings.TrimSpace(*req.URL)
	if _, err := ParseWebhookURL(u); err != nil {
		return "", 0, err
	}
	var events store.WebhookEvents
	for _, name := range req.Events {
		e, ok := store.ParseWebhookEvent(name)
		if !ok {
			return "", 0, fmt.Errorf("unknown event %q; the events are %s", name, strings.Join(store.WebhookEventNames(), ", "))
		}
		events |= e
	}
	if events == 0 {
		return "", 0, fmt.Errorf(`"events" must name at least one of %s`, strings.Join(store.WebhookEventNames(), ", "))
	}
	return u, events, nil
}

// ParseWebhookURL checks a webhook URL's form: absolute http or https,
// a host, no user info, at most store.MaxWebhookURLLen bytes.
func ParseWebhookURL(raw string) (*url.URL, error) {
	if raw == "" || len(raw) > store.MaxWebhookURLLen {
		return nil, fmt.Errorf(`"url" must be 1 to %d characters`, store.MaxWebhookURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf(`"url" is not a URL: %v`, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil || u.Fragment != "" {
		return nil, errors.New(`"url" must be an absolute http or https URL with a host, without user info or fragment`)
	}
	return u, nil
}

// WebhookAddrPublic reports whether a delivery may go to a: not private,
// loopback, link-local, unspecified, multicast, nor in the shared or
// documentation ranges. The node checks every address it dials with it.
func WebhookAddrPublic(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || a.IsPrivate() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
		return false
	}
	for _, p := range nonPublicPrefixes {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

var nonPublicPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"), // documentation ranges
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("2001:db8::/32"),
}

// checkWebhookHost resolves the URL's host and refuses it when any address
// is not public (unless the operator allows private ones).
func (s *Server) checkWebhookHost(ctx context.Context, u *url.URL) error {
	if s.cfg.WebhookAllowPrivate {
		return nil
	}
	host := u.Hostname()
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
			return fmt.Errorf("the host %q is this machine", host)
		}
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		addrs, err = net.DefaultResolver.LookupNetIP(rctx, "ip", host)
		if err != nil {
			return fmt.Errorf("the host %q does not resolve: %v", host, err)
		}
	}
	for _, a := range addrs {
		if !WebhookAddrPublic(a) {
			return fmt.Errorf("the host %q is at %s, which is not a public address", host, a)
		}
	}
	return nil
}

// NewWebhookSecret returns a fresh signing secret.
func NewWebhookSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "whsec_" + hex.EncodeToString(b[:]), nil
}

func (s *Server) createWebhook(ctx *fasthttp.RequestCtx, owner store.Owner, caller store.KeyHash) {
	raw, ok := readBody(ctx)
	if !ok {
		return
	}
	rawURL, events, err := DecodeWebhookRequest(raw)
	if err != nil {
		writeProblem(ctx, probInvalidRequest, err.Error())
		return
	}
	if lacks := webhookReadScopes(events) &^ s.keyScopes(ctx, caller); lacks != 0 {
		writeProblem(ctx, probInsufficientScope, "a webhook delivers what it subscribes to, so making it needs the scopes that read it; this key lacks "+strings.Join(lacks.Names(), ", "))
		return
	}
	u, _ := ParseWebhookURL(rawURL)
	if err := s.checkWebhookHost(context.Background(), u); err != nil {
		writeProblem(ctx, problem.WebhookForbidden, err.Error())
		return
	}
	ww, ok := s.w.(WebhookWriter)
	if !ok {
		writeRetryProblem(ctx, probUnavailable, "this node cannot make webhooks", 30)
		return
	}
	secret, err := NewWebhookSecret()
	if err != nil {
		s.log.Error("cannot generate webhook secret", "err", err)
		writeProblem(ctx, probInternal, "a webhook secret could not be generated")
		return
	}
	wctx, cancel := s.writeContext(ctx)
	defer cancel()
	w, err := ww.CreateWebhook(wctx, &store.Webhook{Owner: owner.ID, URL: rawURL, Events: events, Secret: secret, CreatedAt: s.now().UnixMilli()})
	if errors.Is(err, store.ErrTooManyWebhooks) {
		writeProblem(ctx, problem.WebhookLimit, fmt.Sprintf("this account has %d webhooks already", store.MaxWebhooksPerOwner))
		return
	}
	if err != nil {
		s.writeWriteError(ctx, "webhook", err)
		return
	}
	v := NewWebhookView(&w)
	v.Secret = w.Secret
	ctx.Response.Header.Set("Location", s.publicBase+webhooksPrefix+w.ID)
	writeJSON(ctx, fasthttp.StatusCreated, marshalJSON(v))
}

func (s *Server) listWebhooks(ctx *fasthttp.RequestCtx, owner store.Owner) {
	hooks, err := s.st.Webhooks(owner.ID)
	if err != nil {
		s.log.Error("cannot list webhooks", "owner", owner.ID, "err", err)
		writeProblem(ctx, probInternal, "the webhooks could not be listed")
		return
	}
	out := struct {
		Webhooks []WebhookView `json:"webhooks"`
	}{Webhooks: make([]WebhookView, 0, len(hooks))}
	for i := range hooks {
		out.Webhooks = append(out.Webhooks, NewWebhookView(&hooks[i]))
	}
	writeJSON(ctx, fasthttp.StatusOK, marshalJSON(out))
}

// ownWebhook reads one of owner's webhooks, answering 404 (or 500) itself.
func (s *Server) ownWebhook(ctx *fasthttp.RequestCtx, owner store.Owner, id string) (store.Webhook, bool) {
	if !store.ValidWebhookID(id) {
		writeProblem(ctx, probNotFound, fmt.Sprintf("there is no webhook %q", id))
		return store.Webhook{}, false
	}
	w, found, err := s.st.Webhook(owner.ID, id)
	if err != nil {
		s.log.Error("cannot read webhook", "id", id, "err", err)
		writeProblem(ctx, probInternal, "the webhook could not be read")
		return store.Webhook{}, false
	}
	if !found {
		writeProblem(ctx, probNotFound, fmt.Sprintf("there is no webhook %q", id))
		return store.Webhook{}, false
	}
	return w, true
}

func (s *Server) getWebhook(ctx *fasthttp.RequestCtx, owner store.Owner, id string) {
	if w, ok := s.ownWebhook(ctx, owner, id); ok {
		writeJSON(ctx, fasthttp.StatusOK, marshalJSON(NewWebhookView(&w)))
	}
}

func (s *Server) deleteWebhook(ctx *fasthttp.RequestCtx, owner store.Owner, id string) {
	ww, ok := s.w.(WebhookWriter)
	if !ok {
		writeRetryProblem(ctx, probUnavailable, "this node cannot delete webhooks", 30)
		return
	}
	wctx, cancel := s.writeContext(ctx)
	defer cancel()
	err := ww.DeleteWebhook(wctx, owner.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		writeProblem(ctx, probNotFound, fmt.Sprintf("there is no webhook %q", id))
		return
	}
	if err != nil {
		s.writeWriteError(ctx, "webhook deletion", err)
		return
	}
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

// DeliveryView is one delivery attempt as the API shows it.
type DeliveryView struct {
	EventID   string  `json:"event_id"`
	Type      string  `json:"type"`
	At        string  `json:"at"`
	Attempt   uint64  `json:"attempt"`
	Status    *int    `json:"status"` // null: no HTTP answer
	LatencyMS float64 `json:"latency_ms"`
	Error     string  `json:"error,omitempty"`
	Outcome   string  `json:"outcome"`
}

func (s *Server) webhookDeliveries(ctx *fasthttp.RequestCtx, owner store.Owner, id string) {
	if _, ok := s.ownWebhook(ctx, owner, id); !ok {
		return
	}
	ds, err := s.st.Deliveries(owner.ID, id, maxDeliveriesShow)
	if err != nil {
		s.log.Error("cannot read webhook deliveries", "id", id, "err", err)
		writeProblem(ctx, probInternal, "the deliveries could not be read")
		return
	}
	out := struct {
		Deliveries []DeliveryView `json:"deliveries"`
	}{Deliveries: make([]DeliveryView, 0, len(ds))}
	for i := range ds {
		d := &ds[i]
		v := DeliveryView{EventID: d.EventID, Type: d.Type.String(), At: formatMillis(d.At), Attempt: d.Attempt,
			LatencyMS: float64(d.LatencyUS) / 1000, Error: d.Error, Outcome: d.Outcome.String()}
		if d.Status != 0 {
			st := d.Status
			v.Status = &st
		}
		out.Deliveries = append(out.Deliveries, v)
	}
	writeJSON(ctx, fasthttp.StatusOK, marshalJSON(out))
}

// WebhookEvent is the JSON body of one delivery.
type WebhookEvent struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	CreatedAt string `json:"created_at"`
	Data      any    `json:"data"`
}

// WebhookEventBody is the body of a link event's delivery: its data is
// the link object of the API as the change left it. Everything in it
// comes from the entry, so every attempt (from any leader) sends the
// same bytes.
func (s *Server) WebhookEventBody(e *store.OutboxEntry) []byte {
	l := e.Link
	return marshalJSON(WebhookEvent{ID: e.EventID(), Type: e.Type.String(), CreatedAt: formatMillis(e.CreatedAt),
		Data: s.linkView(&l, time.UnixMilli(e.CreatedAt))})
}
