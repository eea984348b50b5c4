package edge

import (
	"github.com/valyala/fasthttp"
	"strings"

	"github.com/waymark/waymark/store"
)

const historySuffix = "/history"

// HistoryView is one audit record as the APIs show it (the owner's
// GET /v1/links/{code}/history and the operator's `waymark links history`).
type HistoryView struct {
	Index   uint64              `json:"index"`
	At      string              `json:"at"`
	Actor   string              `json:"actor"`
	Action  string              `json:"action"`
	Reason  string              `json:"reason,omitempty"`
	Changes []store.FieldChange `json:"changes"`
}

// HistoryViews converts store records for an API answer.
func HistoryViews(hs []store.HistoryEntry) []HistoryView {
	out := make([]HistoryView, 0, len(hs))
	for _, h := range hs {
		changes := h.Changes
		if changes == nil {
			changes = []store.FieldChange{}
		}
		out = append(out, HistoryView{Index: h.Index, At: formatMillis(h.At), Actor: h.Actor, Action: h.Action, Reason: h.Reason, Changes: changes})
	}
	return out
}

// linkHistory answers GET /v1/links/{code}/history: the audit trail of
// one of the owner's own links (another owner's code is 404, as for GET).
func (s *Server) linkHistory(ctx *fasthttp.RequestCtx, owner store.Owner, code string) {
	l, ok := s.ownedLink(ctx, owner, code)
	if !ok {
		return
	}
	hs, err := s.st.LinkHistory(l.Code, store.MaxHistoryList)
	if err != nil {
		s.log.Error("cannot read link history", "code", l.Code, "err", err)
		writeProblem(ctx, probInternal, "the link's history could not be read")
		return
	}
	setIndex(ctx, l.Index)
	writeJSON(ctx, fasthttp.StatusOK, marshalJSON(struct {
		Code    string        `json:"code"`
		History []HistoryView `json:"history"`
	}{l.Code, HistoryViews(hs)}))
}

// historyCode returns the code of a /v1/links/{code}/history path.
func historyCode(path string) (string, bool) { return linkSubresource(path, historySuffix) }

// linkSubresource returns the code of a /v1/links/{code}{suffix} path.
func linkSubresource(path, suffix string) (string, bool) {
	if len(path) <= len(linksPrefix)+len(suffix) || path[:len(linksPrefix)] != linksPrefix || path[len(path)-len(suffix):] != suffix {
		return "", false
	}
	code := path[len(linksPrefix) : len(path)-len(suffix)]
	if strings.IndexByte(code, '/') >= 0 {
		return "", false
	}
	return code, true
}
