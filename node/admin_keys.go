package node

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/waymark/waymark/edge"
	"github.com/waymark/waymark/edge/problem"
	"github.com/waymark/waymark/store"
)

// The operator endpoints of API keys (issue 12):
//
//	POST   /v1/keys        {"owner": ID, "name": ..., "scopes": [...]}: the secret is in this answer only
//	GET    /v1/keys?owner=ID
//	DELETE /v1/keys/{id}   revoke any owner's key
//
// They write through the log like the public /v1/keys routes, which an
// owner reaches with a key that has keys:write.

// KeyList answers GET /v1/keys.
type KeyList struct {
	Keys []edge.KeyView `json:"keys"`
}

// maxKeyBody bounds a POST /v1/keys body.
const maxKeyBody = 8192

func (a *adminServer) createKey(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Owner string `json:"owner"`
		edge.KeyRequest
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxKeyBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeProblem(w, r, problem.InvalidRequest, `body must be {"owner": "...", "name": "...", "scopes": ["..."]}: `+err.Error())
		return
	}
	name, scopes, err := req.Check()
	if err != nil {
		writeProblem(w, r, problem.InvalidRequest, err.Error())
		return
	}
	if req.Owner == "" || store.CheckOwnerID(req.Owner) != nil {
		writeProblem(w, r, problem.InvalidRequest, `"owner" must name an owner id`)
		return
	}
	k, secret, err := a.n.createKey(r.Context(), req.Owner, name, scopes)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeProblem(w, r, problem.NotFound, "there is no owner "+req.Owner)
		return
	case err != nil:
		writeWriteError(w, r, err)
		return
	}
	a.n.log.Info("API key created", "owner", k.Owner, "key", k.ID, "name", k.Name, "scopes", k.Scopes.String())
	v := edge.NewKeyView(&k)
	v.Secret, v.Owner = secret, k.Owner
	writeJSON(w, http.StatusCreated, v)
}

func (a *adminServer) listKeys(w http.ResponseWriter, r *http.Request) {
	owner := r.URL.Query().Get("owner")
	if owner == "" || store.CheckOwnerID(owner) != nil {
		writeProblem(w, r, problem.InvalidRequest, "give the owner: GET /v1/keys?owner=ID")
		return
	}
	if _, found, err := a.n.store.Owner(owner); err != nil {
		writeProblem(w, r, problem.Internal, err.Error())
		return
	} else if !found {
		writeProblem(w, r, problem.NotFound, "there is no owner "+owner)
		return
	}
	keys, err := a.n.store.APIKeys(owner)
	if err != nil {
		writeProblem(w, r, problem.Internal, err.Error())
		return
	}
	out := KeyList{Keys: make([]edge.KeyView, 0, len(keys))}
	for i := range keys {
		v := edge.NewKeyView(&keys[i])
		v.Owner = keys[i].Owner
		out.Keys = append(out.Keys, v)
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *adminServer) revokeKey(w http.ResponseWriter, r *http.Request) {
	id := strings.ToLower(r.PathValue("id"))
	if err := a.n.disk.writable(); err != nil {
		writeWriteError(w, r, err)
		return
	}
	err := a.n.raft.RevokeKey(r.Context(), "", id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeProblem(w, r, problem.NotFound, "there is no API key "+id)
		return
	case err != nil:
		writeWriteError(w, r, err)
		return
	}
	a.n.log.Info("API key revoked", "key", id)
	w.WriteHeader(http.StatusNoContent)
}

// createKey makes a key with a fresh secret for owner through the log.
func (n *Node) createKey(ctx context.Context, owner, name string, scopes store.Scopes) (store.APIKey, string, error) {
	if err := n.disk.writable(); err != nil {
		return store.APIKey{}, "", err
	}
	for attempt := 1; ; attempt++ {
		secret, err := store.NewAPIKeySecret()
		if err != nil {
			return store.APIKey{}, "", err
		}
		k, err := n.raft.CreateKey(ctx, &store.APIKey{Hash: store.HashAPIKey([]byte(secret)), Owner: owner, Name: name, Scopes: scopes, CreatedAt: time.Now().UnixMilli()})
		if errors.Is(err, store.ErrKeyIDTaken) && attempt < 3 {
			continue // another key's hash starts like this one's: a new secret
		}
		return k, secret, err
	}
}

// CreateKey and RevokeKey let the edge make and revoke keys through the
// disk guard, as its other writes.
func (w guardedWriter) CreateKey(ctx context.Context, k *store.APIKey) (store.APIKey, error) {
	kw, ok := w.Writer.(edge.KeyWriter)
	if !ok {
		return store.APIKey{}, errors.New("BUG: the node's writer cannot make API keys")
	}
	if err := w.g.writable(); err != nil {
		return store.APIKey{}, err
	}
	got, err := kw.CreateKey(ctx, k)
	w.g.noteErr(err)
	return got, err
}

func (w guardedWriter) RevokeKey(ctx context.Context, owner, id string) error {
	kw, ok := w.Writer.(edge.KeyWriter)
	if !ok {
		return errors.New("BUG: the node's writer cannot revoke API keys")
	}
	if err := w.g.writable(); err != nil {
		return err
	}
	err := kw.RevokeKey(ctx, owner, id)
	w.g.noteErr(err)
	return err
}
