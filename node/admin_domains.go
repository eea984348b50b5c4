package node

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/waymark/waymark/edge/problem"
	"github.com/waymark/waymark/store"
)

// The operator side of custom domains (issue 12):
//
//	GET  /v1/domains                    every domain, deleted ones included
//	POST /v1/domains                    {"domain": "go.acme.com", "owner": "ID"}: added approved
//	POST /v1/domains/{domain}/approve   approve a domain its owner registered
//
// Each write is one domain_update log entry.

// DomainView is one domain as the operator API and `waymark domains` show it.
type DomainView struct {
	Domain     string     `json:"domain"`
	Owner      string     `json:"owner"`
	Status     string     `json:"status"`
	CreatedAt  time.Time  `json:"created_at"`
	ApprovedAt *time.Time `json:"approved_at,omitempty"`
	UpdatedAt  time.Time  `json:"updated_at"`
}

func domainView(d *store.Domain) DomainView {
	v := DomainView{Domain: d.Name, Owner: d.Owner, Status: d.Status.String(),
		CreatedAt: time.UnixMilli(d.CreatedAt).UTC(), UpdatedAt: time.UnixMilli(d.UpdatedAt).UTC()}
	if d.ApprovedAt != 0 {
		at := time.UnixMilli(d.ApprovedAt).UTC()
		v.ApprovedAt = &at
	}
	return v
}

func (a *adminServer) listDomains(w http.ResponseWriter, r *http.Request) {
	ds, err := a.n.store.Domains()
	if err != nil {
		writeProblem(w, r, problem.Internal, err.Error())
		return
	}
	out := make([]DomainView, 0, len(ds))
	for i := range ds {
		out = append(out, domainView(&ds[i]))
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *adminServer) addDomain(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Domain string `json:"domain"`
		Owner  string `json:"owner"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeProblem(w, r, problem.InvalidRequest, `body must be {"domain": "go.example.com", "owner": "OWNER_ID"}`)
		return
	}
	name, ok := a.parseDomain(w, r, req.Domain)
	if !ok {
		return
	}
	if _, found, err := a.n.store.Owner(req.Owner); err != nil || !found {
		writeProblem(w, r, problem.NotFound, "there is no owner "+strconv.Quote(req.Owner))
		return
	}
	a.applyDomain(w, r, &store.DomainChange{Op: store.DomainAdd, Name: name, Owner: req.Owner, At: time.Now().UnixMilli()})
}

func (a *adminServer) approveDomain(w http.ResponseWriter, r *http.Request) {
	name, ok := a.parseDomain(w, r, r.PathValue("domain"))
	if !ok {
		return
	}
	a.applyDomain(w, r, &store.DomainChange{Op: store.DomainApprove, Name: name, At: time.Now().UnixMilli()})
}

// parseDomain applies the public API's rules, the cluster's own public
// host included.
func (a *adminServer) parseDomain(w http.ResponseWriter, r *http.Request, raw string) (string, bool) {
	name, err := store.ParseDomainName(raw)
	if err != nil {
		writeProblem(w, r, problem.InvalidDomain, err.Error())
		return "", false
	}
	if srv := a.n.edge.Load(); srv != nil && srv.IsPublicHost(name) {
		writeProblem(w, r, problem.InvalidDomain, "domain "+strconv.Quote(name)+" is this cluster's own public host, the default domain")
		return "", false
	}
	return name, true
}

func (a *adminServer) applyDomain(w http.ResponseWriter, r *http.Request, ch *store.DomainChange) {
	d, _, err := a.n.raft.UpdateDomain(r.Context(), ch)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeProblem(w, r, problem.NotFound, "there is no domain "+strconv.Quote(ch.Name)+" (its owner registers it with POST /v1/domains; `waymark domains add` adds one directly)")
		return
	case errors.Is(err, store.ErrDomainTaken):
		writeProblem(w, r, problem.DomainTaken, err.Error())
		return
	case err != nil:
		writeWriteError(w, r, err)
		return
	}
	a.n.log.Info("custom domain changed", "domain", d.Name, "owner", d.Owner, "status", d.Status.String())
	writeJSON(w, http.StatusOK, domainView(&d))
}

// UpdateDomain lets the edge change custom domains through the disk
// guard, as its other writes.
func (w guardedWriter) UpdateDomain(ctx context.Context, ch *store.DomainChange) (store.Domain, uint64, error) {
	dw, ok := w.Writer.(interface {
		UpdateDomain(context.Context, *store.DomainChange) (store.Domain, uint64, error)
	})
	if !ok {
		return store.Domain{}, 0, errors.New("BUG: the node's writer cannot change domains")
	}
	if err := w.g.writable(); err != nil {
		return store.Domain{}, 0, err
	}
	d, index, err := dw.UpdateDomain(ctx, ch)
	w.g.noteErr(err)
	return d, index, err
}
