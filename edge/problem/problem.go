// Package problem owns Waymark's RFC 9457 problem types: the catalogue of
// type names, titles and statuses, and the writers every HTTP surface uses
// (the public API and its fasthttp errors in edge, the stats API in
// rollup, the internal and operator endpoints in node), so one type name
// always has one title and one status.
package problem

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"
)

// Type is one RFC 9457 problem type. Its URI is /problems/<name>, which
// serves Explain as plain text.
type Type struct {
	Status  int
	Title   string
	Explain string
}

// Problem type names.
const (
	InvalidURL          = "invalid-url"
	DestinationBlocked  = "destination-blocked"
	AliasUnavailable    = "alias-unavailable"
	Unauthorized        = "unauthorized"
	NotFound            = "not-found"
	IdempotencyMismatch = "idempotency-mismatch"
	RateLimited         = "rate-limited"
	Unavailable         = "unavailable"
	InvalidRequest      = "invalid-request"
	TooLarge            = "payload-too-large"
	HeaderTooLarge      = "header-too-large"
	RequestTimeout      = "request-timeout"
	TooManyConnections  = "too-many-connections"
	StorageFull         = "storage-full"
	MethodNotAllowed    = "method-not-allowed"
	PermanentRedirect   = "permanent-redirect"
	LinkLocked          = "link-locked"
	DomainTaken         = "domain-taken"
	InvalidDomain       = "invalid-domain"
	DomainForbidden     = "domain-forbidden"
	DomainNotApproved   = "domain-not-approved"
	GoalExists          = "goal-exists"
	GoalLimit           = "goal-limit"
	Conflict            = "conflict"
	JoinFailed          = "join-failed"
	LeaveFailed         = "leave-failed"
	NotAggregator       = "not-aggregator"
	Forbidden           = "forbidden"
	NotLeader           = "not-leader"
	BadSnapshot         = "bad-snapshot"
	Internal            = "internal"
	InsufficientScope   = "insufficient-scope"
	// Issue 13 point 5: webhooks.
	WebhookForbidden = "webhook-url-forbidden"
	WebhookLimit     = "webhook-limit"
)

var types = map[string]Type{
	InvalidURL: {400, "Invalid URL",
		"The destination URL was refused. It must be an absolute http or https URL with a host, at most 2048 characters, without user info (user@host), and must not point back at this short-link service."},
	DestinationBlocked: {422, "Destination blocked",
		"The destination host, a domain it belongs to, or an address range holding it is on this service's blocklist, or is a URL shortener (a short link to a short link hides where it goes). Links to it cannot be created, and a link cannot be edited to point at it; the detail names the entry that matched."},
	AliasUnavailable: {409, "Alias unavailable",
		"The requested alias cannot be used: it is already taken (codes are never reused, even after a link is deleted), it is a reserved word, or it has the shape of a generated code."},
	Unauthorized: {401, "Unauthorized",
		"The request needs a valid API key in the header 'Authorization: Bearer <key>'."},
	NotFound: {404, "Not found",
		"There is no such resource, or it belongs to another account."},
	IdempotencyMismatch: {422, "Idempotency key reused",
		"The Idempotency-Key was already used in the last 24 hours with a different request body. Use a new key for a new request."},
	RateLimited: {429, "Rate limited",
		"This client or API key has made too many requests. Wait for the number of seconds in the Retry-After header and try again."},
	Unavailable: {503, "Service unavailable",
		"The cluster could not confirm the write right now (no leader, or the outcome is unknown). Retry after the number of seconds in the Retry-After header; use an Idempotency-Key so a retried create cannot make a second link."},
	InvalidRequest: {400, "Invalid request",
		"The request could not be understood: the body must be a JSON object with the documented fields and types, and parameters must be in range."},
	TooLarge: {413, "Request body too large",
		"The request body is larger than this endpoint accepts."},
	HeaderTooLarge: {431, "Request header too large",
		"The request line or headers are larger than this server reads."},
	RequestTimeout: {408, "Request timeout",
		"The request was not received in time."},
	TooManyConnections: {429, "Too many connections",
		"This client has more connections open to the server than it allows, or the server is at its connection limit. Reuse connections and try again."},
	StorageFull: {503, "Storage full",
		"The node's disk is full, so it cannot store the change. Reads keep working; retry after the number of seconds in the Retry-After header or on another node."},
	MethodNotAllowed: {405, "Method not allowed",
		"This endpoint does not support the request method; the Allow header lists the methods it does support."},
	PermanentRedirect: {409, "Permanent redirect",
		"The link uses a permanent redirect (301 or 308), which browsers may cache forever, so its destination cannot be changed. Create a new link instead."},
	LinkLocked: {409, "Link locked",
		"The link is blocked, legally blocked or under review by the operator. Its status cannot be changed by its owner."},
	DomainTaken: {409, "Domain taken",
		"A site, or another owner's custom domain, is already registered for this domain."},
	InvalidDomain: {400, "Invalid domain",
		"The custom domain was refused. It must be a DNS host name of at least two labels (letters, digits and '-' inside a label; internationalised names are sent as they are or as punycode), without scheme, port, path or IP address, and not the cluster's own public host."},
	DomainForbidden: {403, "Domain forbidden",
		"Links can be created on a custom domain only by the owner it is registered to. Register it with POST /v1/domains first."},
	DomainNotApproved: {403, "Domain not approved",
		"The custom domain is registered to you but an operator has not approved it yet (waymark domains approve DOMAIN); links can be created on it once it is approved."},
	GoalExists: {409, "Goal exists",
		"The site already has a goal with this event name, page path or display name. Each must be unique within a site."},
	GoalLimit: {409, "Too many goals",
		"The site already has the most goals allowed (100). Delete one before adding another."},
	Conflict: {409, "Conflict",
		"The request conflicts with the current state of the cluster; the detail says how."},
	JoinFailed: {502, "Join failed",
		"None of the given gossip addresses could be contacted."},
	LeaveFailed: {409, "Leave failed",
		"The node could not leave the cluster cleanly; the detail says why. Nothing was changed."},
	NotAggregator: {409, "Not an aggregator",
		"This node does not have the aggregator role; send the request to the aggregator node."},
	Forbidden: {403, "Forbidden",
		"This endpoint answers only other nodes of the cluster, over TLS with a certificate of the cluster's CA."},
	NotLeader: {409, "Not the leader",
		"This operation runs on the Raft leader, and this node is not it; the detail names the leader. Send the request to that node's admin address."},
	BadSnapshot: {400, "Bad snapshot",
		"The uploaded file is not a Waymark backup this node can restore: it is damaged, cut short, of another format version, or its contents do not decode. Nothing was changed."},
	InsufficientScope: {403, "Insufficient scope",
		"The API key is valid but lacks the scope this request needs (links:read, links:write, stats:read, sites:write, domains:write or keys:write); the detail names it. Use a key that has it, or make one with POST /v1/keys."},
	WebhookForbidden: {422, "Webhook URL forbidden",
		"The webhook URL names, or its host resolves to, a private, loopback, link-local or otherwise non-public address. Deliveries go only to public addresses (checked again at every delivery) unless the operator starts the nodes with --webhook-allow-private."},
	WebhookLimit: {409, "Webhook limit reached",
		"An account has at most 20 webhooks. Delete one (DELETE /v1/webhooks/{id}) before adding another."},
	Internal: {500, "Internal error",
		"The server failed to handle the request. It has been logged; retrying may help."},
}

// Lookup returns the named type.
func Lookup(name string) (Type, bool) {
	t, ok := types[name]
	return t, ok
}

// Names lists every type name.
func Names() []string {
	out := make([]string, 0, len(types))
	for name := range types {
		out = append(out, name)
	}
	return out
}

// body is an application/problem+json document.
type body struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
}

// Body encodes the named problem (an unknown name is Internal) and returns
// its status. instance is the request path.
func Body(name, detail, instance string) (int, []byte) {
	t, ok := types[name]
	if !ok {
		name, t = Internal, types[Internal]
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // URLs with & stay legible
	if err := enc.Encode(body{Type: "/problems/" + name, Title: t.Title, Status: t.Status, Detail: detail, Instance: instance}); err != nil {
		// Only strings and a number: cannot fail.
		return 500, []byte(`{"type":"/problems/internal","title":"Internal error","status":500}` + "\n")
	}
	return t.Status, buf.Bytes()
}

// Write answers a fasthttp request with the named problem and a human
// detail.
func Write(ctx *fasthttp.RequestCtx, name, detail string) {
	status, b := Body(name, detail, string(ctx.Path()))
	ctx.Response.Header.Set("Cache-Control", "no-store")
	if status == fasthttp.StatusUnauthorized {
		ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="waymark"`)
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/problem+json")
	ctx.SetBody(b)
}

// WriteRetry answers a problem that the client should retry after seconds.
func WriteRetry(ctx *fasthttp.RequestCtx, name, detail string, seconds int) {
	Write(ctx, name, detail)
	ctx.Response.Header.Set("Retry-After", strconv.Itoa(max(1, seconds)))
}

// WriteHTTP is Write for net/http handlers (the operator API).
func WriteHTTP(w http.ResponseWriter, r *http.Request, name, detail string) {
	status, b := Body(name, detail, r.URL.Path)
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="waymark"`)
	}
	w.WriteHeader(status)
	w.Write(b)
}

// ServeDoc answers GET /problems/<name> with the explanation.
func ServeDoc(ctx *fasthttp.RequestCtx) {
	name := strings.TrimPrefix(string(ctx.Path()), "/problems/")
	t, ok := types[name]
	ctx.SetContentType("text/plain; charset=utf-8")
	if !ok {
		ctx.SetStatusCode(fasthttp.StatusNotFound)
		ctx.SetBodyString("unknown problem type\n")
		return
	}
	ctx.Response.Header.Set("Cache-Control", "public, max-age=86400")
	ctx.SetBodyString(t.Title + " (HTTP " + strconv.Itoa(t.Status) + ")\n\n" + t.Explain + "\n")
}
