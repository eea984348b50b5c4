package edge

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"
)

// problemType is one RFC 9457 problem type. Its URI is /problems/<name>,
// which serves explain as plain text.
type problemType struct {
	status  int
	title   string
	explain string
}

// Problem type names.
const (
	probInvalidURL          = "invalid-url"
	probDestinationBlocked  = "destination-blocked"
	probAliasUnavailable    = "alias-unavailable"
	probUnauthorized        = "unauthorized"
	probNotFound            = "not-found"
	probIdempotencyMismatch = "idempotency-mismatch"
	probRateLimited         = "rate-limited"
	probUnavailable         = "unavailable"
	probInvalidRequest      = "invalid-request"
	probTooLarge            = "payload-too-large"
	probMethodNotAllowed    = "method-not-allowed"
	probPermanentRedirect   = "permanent-redirect"
	probLinkLocked          = "link-locked"
	probDomainTaken         = "domain-taken"
	probGoalExists          = "goal-exists"
	probGoalLimit           = "goal-limit"
	probInternal            = "internal"
)

var problemTypes = map[string]problemType{
	probInvalidURL: {400, "Invalid URL",
		"The destination URL was refused. It must be an absolute http or https URL with a host, at most 2048 characters, without user info (user@host), and must not point back at this short-link service."},
	probDestinationBlocked: {400, "Destination blocked",
		"The destination host, or a domain it belongs to, is on this service's blocklist. Links to it cannot be created."},
	probAliasUnavailable: {409, "Alias unavailable",
		"The requested alias cannot be used: it is already taken (codes are never reused, even after a link is deleted), it is a reserved word, or it has the shape of a generated code."},
	probUnauthorized: {401, "Unauthorized",
		"The request needs a valid API key in the header 'Authorization: Bearer <key>'."},
	probNotFound: {404, "Not found",
		"There is no such resource, or it belongs to another account."},
	probIdempotencyMismatch: {422, "Idempotency key reused",
		"The Idempotency-Key was already used in the last 24 hours with a different request body. Use a new key for a new request."},
	probRateLimited: {429, "Rate limited",
		"This API key has made too many write requests. Wait for the number of seconds in the Retry-After header and try again."},
	probUnavailable: {503, "Service unavailable",
		"The cluster could not confirm the write right now (no leader, or the outcome is unknown). Retry after the number of seconds in the Retry-After header; use an Idempotency-Key so a retried create cannot make a second link."},
	probInvalidRequest: {400, "Invalid request",
		"The request could not be understood: the body must be a JSON object with the documented fields and types, and parameters must be in range."},
	probTooLarge: {413, "Request body too large",
		"The request body is larger than this endpoint accepts."},
	probMethodNotAllowed: {405, "Method not allowed",
		"This endpoint does not support the request method; the Allow header lists the methods it does support."},
	probPermanentRedirect: {409, "Permanent redirect",
		"The link uses a permanent redirect (301 or 308), which browsers may cache forever, so its destination cannot be changed. Create a new link instead."},
	probLinkLocked: {409, "Link locked",
		"The link is blocked, legally blocked or under review by the operator. Its status cannot be changed by its owner."},
	probDomainTaken: {409, "Domain taken",
		"A site is already registered for this domain."},
	probGoalExists: {409, "Goal exists",
		"The site already has a goal with this event name, page path or display name. Each must be unique within a site."},
	probGoalLimit: {409, "Too many goals",
		"The site already has the most goals allowed (100). Delete one before adding another."},
	probInternal: {500, "Internal error",
		"The server failed to handle the request. It has been logged; retrying may help."},
}

// problem is the body of an application/problem+json answer.
type problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
}

// writeProblem answers with the named problem type and a human detail.
func writeProblem(ctx *fasthttp.RequestCtx, name, detail string) {
	pt, ok := problemTypes[name]
	if !ok {
		name, pt = probInternal, problemTypes[probInternal]
	}
	body := marshalJSON(problem{
		Type:     "/problems/" + name,
		Title:    pt.title,
		Status:   pt.status,
		Detail:   detail,
		Instance: string(ctx.Path()),
	})
	ctx.Response.Header.Set("Cache-Control", "no-store")
	if pt.status == fasthttp.StatusUnauthorized {
		ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="waymark"`)
	}
	ctx.SetStatusCode(pt.status)
	ctx.SetContentType("application/problem+json")
	ctx.SetBody(body)
}

// writeRetryProblem answers a problem that the client should retry later.
func writeRetryProblem(ctx *fasthttp.RequestCtx, name, detail string, seconds int) {
	writeProblem(ctx, name, detail)
	ctx.Response.Header.Set("Retry-After", strconv.Itoa(max(1, seconds)))
}

// serveProblemDoc answers GET /problems/<name> with the explanation.
func serveProblemDoc(ctx *fasthttp.RequestCtx) {
	name := strings.TrimPrefix(string(ctx.Path()), "/problems/")
	pt, ok := problemTypes[name]
	ctx.SetContentType("text/plain; charset=utf-8")
	if !ok {
		ctx.SetStatusCode(fasthttp.StatusNotFound)
		ctx.SetBodyString("unknown problem type\n")
		return
	}
	ctx.Response.Header.Set("Cache-Control", "public, max-age=86400")
	ctx.SetBodyString(pt.title + " (HTTP " + strconv.Itoa(pt.status) + ")\n\n" + pt.explain + "\n")
}

// marshalJSON encodes v without HTML escaping, so URLs with & stay legible.
func marshalJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only our own plain structs of strings and numbers come here, which
		// always encode; never fail a request over it.
		return []byte(`{"type":"/problems/internal","title":"Internal error","status":500}` + "\n")
	}
	return buf.Bytes()
}
