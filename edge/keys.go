package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/store"
)

// The key API, on the public port with a Bearer key that has keys:write:
//
//	GET    /v1/keys        the caller's keys (never their secrets)
//	POST   /v1/keys        {"name": ..., "scopes": [...]}: a new key; its secret is in this answer only
//	DELETE /v1/keys/{id}   revoke a key (the caller's own included)
//
// A key can only make keys with scopes it has itself. Another owner's key
// answers 404, exactly as a missing one.
const (
	keysPath   = "/v1/keys"
	keysPrefix = "/v1/keys/"
)

// KeyWriter is what the server needs to make and revoke keys; the writer
// the node hands the server implements it (raft.Node, through the disk
// guard). Without it the key routes answer 503.
type KeyWriter interface {
	CreateKey(ctx context.Context, k *store.APIKey) (store.APIKey, error)
	RevokeKey(ctx context.Context, owner, id string) error
}

// dispatchKeys routes the key endpoints and reports whether path was one.
func (s *Server) dispatchKeys(ctx *fasthttp.RequestCtx, path, method string) (string, bool) {
	if path == keysPath {
		switch method {
		case fasthttp.MethodPost:
			s.withOwnerKey(ctx, s.createKey)
			return "keys.create", true
		case fasthttp.MethodGet:
			s.withOwner(ctx, false, s.listKeys)
			return "keys.list", true
		}
		methodNotAllowed(ctx, "GET, POST")
		return "keys", true
	}
	id, ok := strings.CutPrefix(path, keysPrefix)
	if !ok || id == "" || strings.IndexByte(id, '/') >= 0 {
		return "", false
	}
	if method != fasthttp.MethodDelete {
		methodNotAllowed(ctx, "DELETE")
		return "key", true
	}
	s.withOwner(ctx, true, func(ctx *fasthttp.RequestCtx, o store.Owner) { s.revokeKey(ctx, o, id) })
	return "keys.revoke", true
}

// withOwnerKey is withOwner for a write that also needs the caller's key.
func (s *Server) withOwnerKey(ctx *fasthttp.RequestCtx, fn func(*fasthttp.RequestCtx, store.Owner, store.KeyHash)) {
	owner, key, ok := s.authenticate(ctx)
	if !ok || !s.allowWrite(ctx, key) {
		return
	}
	fn(ctx, owner, key)
}

// KeyView is a key as the public and operator APIs show it. Secret is set
// only in the answer that creates the key.
type KeyView struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	Scopes     []string `json:"scopes"`
	CreatedAt  string   `json:"created_at"`
	LastUsedAt *string  `json:"last_used_at"`
	Secret     string   `json:"key,omitempty"`
	Owner      string   `json:"owner,omitempty"` // operator API only
}

// NewKeyView shows k.
func NewKeyView(k *store.APIKey) KeyView {
	v := KeyView{ID: k.ID, Name: k.Name, Scopes: k.Scopes.Names(), CreatedAt: formatMillis(k.CreatedAt)}
	if k.LastUsed != 0 {
		t := formatMillis(k.LastUsed)
		v.LastUsedAt = &t
	}
	return v
}

// KeyRequest is the body of POST /v1/keys (the operator's adds the owner).
type KeyRequest struct {
	Name   *string  `json:"name"`
	Scopes []string `json:"scopes"`
}

// Check returns the trimmed name, which store.CheckKeyName must accept,
// and the scopes, at least one and all known.
func (req *KeyRequest) Check() (string, store.Scopes, error) {
	if req.Name == nil {
		return "", 0, errors.New(`"name" is required`)
	}
	name := strings.TrimSpace(*req.Name)
	if err := store.CheckKeyName(name); err != nil {
		return "", 0, err
	}
	scopes, err := ParseScopes(req.Scopes)
	return name, scopes, err
}

// decodeKeyRequest reads one KeyRequest object without other fields.
func decodeKeyRequest(raw []byte) (string, store.Scopes, error) {
	var req KeyRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return "", 0, fmt.Errorf(`the body must be a JSON object {"name": "...", "scopes": ["..."]}: %v`, err)
	}
	if dec.More() {
		return "", 0, errors.New("the body must be one JSON object")
	}
	return req.Check()
}

// ParseScopes reads scope names (each may itself be a comma-separated
// list); there must be at least one, and every one must be known.
func ParseScopes(names []string) (store.Scopes, error) {
	var scopes store.Scopes
	for _, n := range names {
		for _, part := range strings.Split(n, ",") {
			part = strings.TrimSpace(part)
			sc, ok := store.ParseScope(part)
			if !ok {
				return 0, fmt.Errorf("unknown scope %q; the scopes are %s", part, strings.Join(store.ScopeNames(), ", "))
			}
			scopes |= sc
		}
	}
	if scopes == 0 {
		return 0, fmt.Errorf(`"scopes" must name at least one of %s`, strings.Join(store.ScopeNames(), ", "))
	}
	return scopes, nil
}

// newKeyAttempts bounds the retries of a secret whose id is taken (two
// keys sharing the first 8 bytes of their hash: practically never).
const newKeyAttempts = 3

func (s *Server) createKey(ctx *fasthttp.RequestCtx, owner store.Owner, caller store.KeyHash) {
	raw, ok := readBody(ctx)
	if !ok {
		return
	}
	name, scopes, err := decodeKeyRequest(raw)
	if err != nil {
		writeProblem(ctx, probInvalidRequest, err.Error())
		return
	}
	if have := s.keyScopes(ctx, caller); !have.Has(scopes) {
		writeProblem(ctx, probInsufficientScope, "a key cannot grant scopes it lacks itself; this key lacks "+strings.Join((scopes&^have).Names(), ", "))
		return
	}
	kw, ok := s.w.(KeyWriter)
	if !ok {
		writeRetryProblem(ctx, probUnavailable, "this node cannot make API keys", 30)
		return
	}
	wctx, cancel := s.writeContext(ctx)
	defer cancel()
	for attempt := 1; ; attempt++ {
		secret, err := store.NewAPIKeySecret()
		if err != nil {
			s.log.Error("cannot generate API key", "err", err)
			writeProblem(ctx, probInternal, "an API key could not be generated")
			return
		}
		k, err := kw.CreateKey(wctx, &store.APIKey{Hash: store.HashAPIKey([]byte(secret)), Owner: owner.ID, Name: name, Scopes: scopes, CreatedAt: s.now().UnixMilli()})
		if errors.Is(err, store.ErrKeyIDTaken) && attempt < newKeyAttempts {
			continue
		}
		if err != nil {
			s.writeWriteError(ctx, "API key", err)
			return
		}
		v := NewKeyView(&k)
		v.Secret = secret
		ctx.Response.Header.Set("Location", s.publicBase+keysPrefix+k.ID)
		writeJSON(ctx, fasthttp.StatusCreated, marshalJSON(v))
		return
	}
}

func (s *Server) listKeys(ctx *fasthttp.RequestCtx, owner store.Owner) {
	keys, err := s.st.APIKeys(owner.ID)
	if err != nil {
		s.log.Error("cannot list API keys", "owner", owner.ID, "err", err)
		writeProblem(ctx, probInternal, "the API keys could not be listed")
		return
	}
	out := struct {
		Keys []KeyView `json:"keys"`
	}{Keys: make([]KeyView, 0, len(keys))}
	for i := range keys {
		out.Keys = append(out.Keys, NewKeyView(&keys[i]))
	}
	writeJSON(ctx, fasthttp.StatusOK, marshalJSON(out))
}

func (s *Server) revokeKey(ctx *fasthttp.RequestCtx, owner store.Owner, id string) {
	kw, ok := s.w.(KeyWriter)
	if !ok {
		writeRetryProblem(ctx, probUnavailable, "this node cannot revoke API keys", 30)
		return
	}
	wctx, cancel := s.writeContext(ctx)
	defer cancel()
	err := kw.RevokeKey(wctx, owner.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		writeProblem(ctx, probNotFound, fmt.Sprintf("there is no API key %q", id))
		return
	}
	if err != nil {
		s.writeWriteError(ctx, "revocation", err)
		return
	}
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}
