package edge

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/store"
)

const maxIdempotencyKeyLen = 255

// idempotencyKey reads the Idempotency-Key header ("" when absent), or
// answers 400 when it is malformed.
func idempotencyKey(ctx *fasthttp.RequestCtx) (string, bool) {
	v := ctx.Request.Header.Peek("Idempotency-Key")
	if v == nil {
		return "", true
	}
	ok := len(v) > 0 && len(v) <= maxIdempotencyKeyLen
	for _, c := range v {
		if c < 0x21 || c > 0x7e {
			ok = false
		}
	}
	if !ok {
		writeProblem(ctx, probInvalidRequest, fmt.Sprintf("Idempotency-Key must be 1 to %d visible ASCII characters", maxIdempotencyKeyLen))
		return "", false
	}
	return string(v), true
}

// requestHash identifies a request for idempotency: who sent it, to which
// endpoint, with which (canonical, already normalised) body. Two bodies that
// differ only in whitespace, key order or URL host case hash the same.
func requestHash(owner, endpoint string, canonical []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte(owner))
	h.Write([]byte{0})
	h.Write([]byte(endpoint))
	h.Write([]byte{0})
	h.Write(canonical)
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// idempotencyLive reports whether a record is still honoured at now.
func idempotencyLive(rec *store.Idempotency, now time.Time) bool {
	return now.UnixMilli()-rec.CreatedAt < store.IdempotencyTTL
}

func idempotencyMismatchDetail(key string) string {
	return fmt.Sprintf("Idempotency-Key %q was used in the last 24 hours for a different request; use a new key for a new request", key)
}

// replay answers with the stored response of an earlier request with the
// same key, or 422 when this request's body differs.
func (s *Server) replay(ctx *fasthttp.RequestCtx, rec *store.Idempotency, reqHash [32]byte, key string) {
	if rec.RequestHash != reqHash {
		writeProblem(ctx, probIdempotencyMismatch, idempotencyMismatchDetail(key))
		return
	}
	var created struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(rec.Response, &created) == nil && created.Code != "" {
		ctx.Response.Header.Set("Location", s.publicBase+linksPrefix+created.Code)
	}
	ctx.Response.Header.Set("Idempotent-Replayed", "true")
	writeJSON(ctx, rec.Status, rec.Response)
}
