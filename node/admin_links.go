package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/waymark/waymark/edge"
	"github.com/waymark/waymark/edge/problem"
	"github.com/waymark/waymark/store"
)

// Operator takedowns: block, legal block, review and restore one link,
// each one edit through the raft log (store.LinkPatch without an owner,
// so the FSM lets no owner lift it), recorded in the link's history with
// the operator's reason.

// LinkInfo is a link as `waymark links show` prints it.
type LinkInfo struct {
	Code        string `json:"code"`
	URL         string `json:"url"`
	Owner       string `json:"owner"`
	Status      string `json:"status"`
	Redirect    int    `json:"redirect"`
	CreatedAt   string `json:"created_at"`
	UpdatedAt   string `json:"updated_at"`
	ExpiresAt   string `json:"expires_at,omitempty"`
	ClickLimit  int64  `json:"click_limit,omitempty"`
	ReviewUntil string `json:"review_until,omitempty"`
	// Reason and ReasonBy are those of the latest status change.
	Reason   string `json:"reason,omitempty"`
	ReasonBy string `json:"reason_by,omitempty"`
	Index    uint64 `json:"index"`
}

// LinkHistory is the answer of GET /v1/links/{code}/history.
type LinkHistory struct {
	Code    string             `json:"code"`
	History []edge.HistoryView `json:"history"`
}

// takedownRequest is the body of the block, review and restore routes.
type takedownRequest struct {
	Reason string `json:"reason"`
	Legal  bool   `json:"legal"`
}

func millisOrEmpty(ms int64) string {
	if ms == 0 {
		return ""
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}

func (a *adminServer) linkInfo(l *store.Link) (LinkInfo, error) {
	info := LinkInfo{
		Code: l.Code, URL: l.URL, Owner: l.Owner, Status: l.Status.String(), Redirect: int(l.Redirect),
		CreatedAt: millisOrEmpty(l.CreatedAt), UpdatedAt: millisOrEmpty(l.UpdatedAt), ExpiresAt: millisOrEmpty(l.ExpiresAt),
		ClickLimit: l.ClickLimit, Index: l.Index,
	}
	if l.InReview(time.Now().UnixMilli()) {
		info.ReviewUntil = millisOrEmpty(l.ReviewUntil)
	}
	hs, err := a.n.store.LinkHistory(l.Code, store.MaxHistoryList)
	if err != nil {
		return info, err
	}
	for i := len(hs) - 1; i >= 0; i-- {
		if changesStatus(&hs[i]) {
			info.Reason, info.ReasonBy = hs[i].Reason, hs[i].Actor
			break
		}
	}
	return info, nil
}

func changesStatus(h *store.HistoryEntry) bool {
	for _, c := range h.Changes {
		if c.Field == "status" {
			return true
		}
	}
	return false
}

// readLink loads the link named in the path, or answers 404.
func (a *adminServer) readLink(w http.ResponseWriter, r *http.Request) (store.Link, bool) {
	code := r.PathValue("code")
	var l store.Link
	found, err := a.n.store.GetLink([]byte(code), &l)
	if err != nil {
		writeProblem(w, r, problem.Internal, err.Error())
		return l, false
	}
	if !found {
		writeProblem(w, r, problem.NotFound, fmt.Sprintf("there is no link %q on this node", code))
		return l, false
	}
	return l, true
}

func (a *adminServer) showLink(w http.ResponseWriter, r *http.Request) {
	l, ok := a.readLink(w, r)
	if !ok {
		return
	}
	info, err := a.linkInfo(&l)
	if err != nil {
		writeProblem(w, r, problem.Internal, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (a *adminServer) linkHistory(w http.ResponseWriter, r *http.Request) {
	l, ok := a.readLink(w, r)
	if !ok {
		return
	}
	hs, err := a.n.store.LinkHistory(l.Code, store.MaxHistoryList)
	if err != nil {
		writeProblem(w, r, problem.Internal, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, LinkHistory{Code: l.Code, History: edge.HistoryViews(hs)})
}

// decodeTakedown reads the body of block, review and restore. A block
// needs a reason and may be legal; the others refuse "legal".
func decodeTakedown(w http.ResponseWriter, r *http.Request, block bool) (takedownRequest, bool) {
	var req takedownRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 16<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeProblem(w, r, problem.InvalidRequest, `body must be {"reason": "...", "legal": false}: `+err.Error())
		return req, false
	}
	req.Reason = strings.TrimSpace(req.Reason)
	switch {
	case !block && req.Legal:
		writeProblem(w, r, problem.InvalidRequest, `"legal" applies to a block only`)
		return req, false
	case block && req.Reason == "":
		writeProblem(w, r, problem.InvalidRequest, "a block needs a reason (--reason TEXT); it is kept in the link's history")
		return req, false
	case len(req.Reason) > store.MaxReasonLen:
		writeProblem(w, r, problem.InvalidRequest, fmt.Sprintf("reason is %d bytes; at most %d", len(req.Reason), store.MaxReasonLen))
		return req, false
	}
	return req, true
}

// takeDownFrom are the statuses a link can be blocked or put under review
// from: anything but deleted by its owner (it answers 410 already, and a
// later restore must not bring back what its owner deleted).
var takeDownFrom = store.MaskOf(store.StatusActive, store.StatusBlocked, store.StatusLegalBlock, store.StatusReview, store.StatusLimited)

func (a *adminServer) blockLink(w http.ResponseWriter, r *http.Request) {
	req, ok := decodeTakedown(w, r, true)
	if !ok {
		return
	}
	status := store.StatusBlocked
	if req.Legal {
		status = store.StatusLegalBlock
	}
	a.takeDown(w, r, status, req.Reason)
}

func (a *adminServer) reviewLink(w http.ResponseWriter, r *http.Request) {
	req, ok := decodeTakedown(w, r, false)
	if !ok {
		return
	}
	a.takeDown(w, r, store.StatusReview, req.Reason)
}

func (a *adminServer) takeDown(w http.ResponseWriter, r *http.Request, status store.Status, reason string) {
	l, ok := a.readLink(w, r)
	if !ok {
		return
	}
	if !takeDownFrom.Has(l.Status) {
		writeProblem(w, r, problem.Conflict, fmt.Sprintf("link %q was deleted by its owner (status %s); it answers 410 already", l.Code, l.Status))
		return
	}
	a.applyOperatorPatch(w, r, &store.LinkPatch{
		Code: l.Code, UpdatedAt: time.Now().UnixMilli(), SetStatus: true, Status: status,
		OnlyFrom: takeDownFrom, Actor: store.ActorOperator, Reason: reason,
	})
}

// restoreLink lifts an operator status, back to the status the link had
// before it (active, or click-limited), and ends an edit's review window;
// on an active link it only ends the window.
func (a *adminServer) restoreLink(w http.ResponseWriter, r *http.Request) {
	req, ok := decodeTakedown(w, r, false)
	if !ok {
		return
	}
	l, ok := a.readLink(w, r)
	if !ok {
		return
	}
	p := store.LinkPatch{Code: l.Code, UpdatedAt: time.Now().UnixMilli(), ClearReview: true, Actor: store.ActorOperator, Reason: req.Reason}
	switch {
	case store.OperatorStatus(l.Status):
		before, err := a.statusBeforeTakedown(l.Code)
		if err != nil {
			writeProblem(w, r, problem.Internal, err.Error())
			return
		}
		p.SetStatus, p.Status, p.OnlyFrom = true, before, store.OperatorStatuses
		p.Action = store.ActionRestore
	case l.ReviewUntil != 0:
		p.OnlyFrom = store.MaskOf(l.Status)
		p.Action = store.ActionRestore
	default:
		writeProblem(w, r, problem.Conflict, fmt.Sprintf("link %q is %s, not blocked or under review; nothing to restore", l.Code, l.Status))
		return
	}
	a.applyOperatorPatch(w, r, &p)
}

// statusBeforeTakedown is the status a link had before the run of
// operator statuses it is in now, from its history (active if unknown).
func (a *adminServer) statusBeforeTakedown(code string) (store.Status, error) {
	hs, err := a.n.store.LinkHistory(code, store.MaxHistoryList)
	if err != nil {
		return 0, err
	}
	for i := len(hs) - 1; i >= 0; i-- {
		for _, c := range hs[i].Changes {
			if c.Field != "status" {
				continue
			}
			old, ok := store.ParseStatus(c.Old)
			if ok && !store.OperatorStatus(old) && old != store.StatusDisabled {
				return old, nil
			}
		}
	}
	return store.StatusActive, nil
}

func (a *adminServer) applyOperatorPatch(w http.ResponseWriter, r *http.Request, p *store.LinkPatch) {
	l, err := a.n.raft.UpdateLink(r.Context(), p)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeProblem(w, r, problem.NotFound, fmt.Sprintf("there is no link %q", p.Code))
		return
	case errors.Is(err, store.ErrStatusChanged):
		writeProblem(w, r, problem.Conflict, fmt.Sprintf("link %q changed while the request was made: %v; look again with `waymark links show`", p.Code, err))
		return
	case err != nil:
		writeWriteError(w, r, err)
		return
	}
	a.n.log.Info("operator changed a link", "code", l.Code, "status", l.Status.String(), "action", p.Action, "reason", p.Reason, "index", l.Index)
	info, err := a.linkInfo(&l)
	if err != nil {
		writeProblem(w, r, problem.Internal, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, info)
}

// editReview maps the --edit-review flag (0 disables) onto the edge's
// setting (0 takes the default, negative disables).
func editReview(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}
