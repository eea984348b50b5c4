package edge

import (
	"bytes"
	"encoding/json"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/edge/problem"
)

// Problem type names, short for the handlers here; the catalogue of
// titles and statuses is package problem's, shared with the stats API and
// the node's own endpoints.
const (
	probInvalidURL          = problem.InvalidURL
	probDestinationBlocked  = problem.DestinationBlocked
	probAliasUnavailable    = problem.AliasUnavailable
	probUnauthorized        = problem.Unauthorized
	probNotFound            = problem.NotFound
	probIdempotencyMismatch = problem.IdempotencyMismatch
	probRateLimited         = problem.RateLimited
	probUnavailable         = problem.Unavailable
	probInvalidRequest      = problem.InvalidRequest
	probTooLarge            = problem.TooLarge
	probMethodNotAllowed    = problem.MethodNotAllowed
	probPermanentRedirect   = problem.PermanentRedirect
	probLinkLocked          = problem.LinkLocked
	probDomainTaken         = problem.DomainTaken
	probInvalidDomain       = problem.InvalidDomain
	probDomainForbidden     = problem.DomainForbidden
	probDomainNotApproved   = problem.DomainNotApproved
	probGoalExists          = problem.GoalExists
	probGoalLimit           = problem.GoalLimit
	probStorageFull         = problem.StorageFull
	probInternal            = problem.Internal
	probInsufficientScope   = problem.InsufficientScope
)

// writeProblem answers with the named problem type and a human detail.
func writeProblem(ctx *fasthttp.RequestCtx, name, detail string) { problem.Write(ctx, name, detail) }

// writeRetryProblem answers a problem that the client should retry later.
func writeRetryProblem(ctx *fasthttp.RequestCtx, name, detail string, seconds int) {
	problem.WriteRetry(ctx, name, detail, seconds)
}

// serveProblemDoc answers GET /problems/<name> with the explanation.
func serveProblemDoc(ctx *fasthttp.RequestCtx) { problem.ServeDoc(ctx) }

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
