package node

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/waymark/waymark/edge"
	"github.com/waymark/waymark/edge/problem"
	"github.com/waymark/waymark/store"
)

// The operator side of public reports:
//
//	GET  /v1/reports?status=open|resolved|all   cases, oldest first (default open)
//	POST /v1/reports/{id}/resolve               {"action": "block|legal|review|dismiss", "reason": "..."}
//
// A resolution is one resolve_report log entry: it closes the case and puts
// the operator status on the link (dismiss leaves the link alone).

// maxReportsListed bounds one list answer.
const maxReportsListed = 10000

// ReportView is one case as the operator API and `waymark reports` show it.
type ReportView struct {
	ID             string     `json:"id"`
	Code           string     `json:"code"`
	Destination    string     `json:"destination"`
	Owner          string     `json:"owner"`
	LinkStatus     string     `json:"link_status"`
	Count          uint64     `json:"count"`
	Reasons        []string   `json:"reasons"`
	FirstAt        time.Time  `json:"first_at"`
	LastAt         time.Time  `json:"last_at"`
	Details        []string   `json:"details"`
	Status         string     `json:"status"` // open or resolved
	Action         string     `json:"action,omitempty"`
	ResolvedAt     *time.Time `json:"resolved_at,omitempty"`
	ResolvedBy     string     `json:"resolved_by,omitempty"`
	ResolvedReason string     `json:"resolved_reason,omitempty"`
}

func (n *Node) reportView(r *store.Report) ReportView {
	v := ReportView{
		ID: strconv.FormatUint(r.ID, 10), Code: r.Code, Count: r.Count, Reasons: r.Reasons.Names(),
		FirstAt: time.UnixMilli(r.FirstAt).UTC(), LastAt: time.UnixMilli(r.LastAt).UTC(),
		Details: r.Details, Status: "open",
	}
	if v.Details == nil {
		v.Details = []string{}
	}
	var l store.Link
	if found, err := n.store.GetLink([]byte(r.Code), &l); err == nil && found {
		v.Destination, v.Owner, v.LinkStatus = l.URL, l.Owner, l.Status.String()
	}
	if !r.Open() {
		at := time.UnixMilli(r.ResolvedAt).UTC()
		v.Status, v.Action, v.ResolvedAt, v.ResolvedReason = "resolved", r.Action.String(), &at, r.ResolvedReason
		v.ResolvedBy = r.ResolvedBy
		if v.ResolvedBy == "" {
			v.ResolvedBy = "operator"
		}
	}
	return v
}

func (a *adminServer) listReports(w http.ResponseWriter, r *http.Request) {
	var open, resolved bool
	switch s := r.URL.Query().Get("status"); s {
	case "", "open":
		open = true
	case "resolved":
		resolved = true
	case "all":
		open, resolved = true, true
	default:
		writeProblem(w, r, problem.InvalidRequest, "status must be open, resolved or all; got "+strconv.Quote(s))
		return
	}
	reps, err := a.n.store.Reports(open, resolved, maxReportsListed)
	if err != nil {
		writeProblem(w, r, problem.Internal, err.Error())
		return
	}
	out := make([]ReportView, 0, len(reps))
	for i := range reps {
		out = append(out, a.n.reportView(&reps[i]))
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *adminServer) resolveReport(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		writeProblem(w, r, problem.NotFound, "there is no report "+strconv.Quote(r.PathValue("id")))
		return
	}
	var req struct {
		Action string `json:"action"`
		Reason string `json:"reason"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 8<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeProblem(w, r, problem.InvalidRequest, `body must be {"action": "block|legal|review|dismiss", "reason": "..."}`)
		return
	}
	action, ok := store.ParseReportAction(req.Action)
	if !ok {
		writeProblem(w, r, problem.InvalidRequest, "action must be block, legal, review or dismiss; got "+strconv.Quote(req.Action))
		return
	}
	res := store.ReportResolution{ID: id, Action: action, Reason: strings.TrimSpace(req.Reason), At: time.Now().UnixMilli()}
	if err := res.Check(); err != nil {
		writeProblem(w, r, problem.InvalidRequest, err.Error())
		return
	}
	rep, err := a.n.raft.ResolveReport(r.Context(), &res)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeProblem(w, r, problem.NotFound, "there is no report "+strconv.FormatUint(id, 10))
		return
	case errors.Is(err, store.ErrReportResolved):
		writeProblem(w, r, problem.Conflict, err.Error())
		return
	case err != nil:
		writeWriteError(w, r, err)
		return
	}
	a.n.log.Info("resolved report", "report", id, "code", rep.Code, "action", action.String(), "reason", res.Reason)
	writeJSON(w, http.StatusOK, a.n.reportView(&rep))
}

// FileReport lets the edge store reports through the disk guard, as its
// other writes.
func (w guardedWriter) FileReport(ctx context.Context, f *store.ReportFiling) (store.Report, error) {
	rf, ok := w.Writer.(edge.ReportFiler)
	if !ok {
		return store.Report{}, errors.New("BUG: the node's writer cannot file reports")
	}
	if err := w.g.writable(); err != nil {
		return store.Report{}, err
	}
	rep, err := rf.FileReport(ctx, f)
	w.g.noteErr(err)
	return rep, err
}
