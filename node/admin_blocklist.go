package node

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/waymark/waymark/edge/problem"
	"github.com/waymark/waymark/raft"
	"github.com/waymark/waymark/store"
)

// The operator endpoints of the replicated blocklist:
//
//	POST /v1/blocklist  {"add": [{"entry", "kind", "reason"}], "remove": ["entry"]}
//	GET  /v1/blocklist?after=ENTRY&limit=N
//
// One POST is one log entry (at most raft.MaxBlocklistChanges changes);
// `waymark blocklist import` cuts a file into such batches.

// BlocklistAdd is one entry to add, as the operator writes it.
type BlocklistAdd struct {
	Entry  string `json:"entry"`
	Kind   string `json:"kind,omitempty"` // block (default) or shortener
	Reason string `json:"reason,omitempty"`
}

// BlocklistUpdate is the body of POST /v1/blocklist.
type BlocklistUpdate struct {
	Add    []BlocklistAdd `json:"add,omitempty"`
	Remove []string       `json:"remove,omitempty"`
}

// BlocklistResult answers POST /v1/blocklist.
type BlocklistResult struct {
	Added   []string `json:"added"`   // canonical values
	Removed []string `json:"removed"` // canonical values
	Index   uint64   `json:"index"`
}

// BlocklistEntry is one entry as `blocklist list` shows it.
type BlocklistEntry struct {
	Entry   string    `json:"entry"`
	Kind    string    `json:"kind"`
	Reason  string    `json:"reason"`
	AddedAt time.Time `json:"added_at"`
}

// BlocklistPage answers GET /v1/blocklist.
type BlocklistPage struct {
	Entries []BlocklistEntry `json:"entries"`
	Next    string           `json:"next,omitempty"` // pass as after= for the next page
	Total   int              `json:"total"`          // replicated entries in all
}

// maxBlocklistBody bounds a POST: MaxBlocklistChanges entries of a long
// name and reason each, JSON-quoted.
const maxBlocklistBody = 4 << 20

func (a *adminServer) updateBlocklist(w http.ResponseWriter, r *http.Request) {
	var req BlocklistUpdate
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBlocklistBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeProblem(w, r, problem.InvalidRequest, `body must be {"add": [{"entry": "...", "kind": "block|shortener", "reason": "..."}], "remove": ["..."]}: `+err.Error())
		return
	}
	n := len(req.Add) + len(req.Remove)
	if n == 0 || n > raft.MaxBlocklistChanges {
		writeProblem(w, r, problem.InvalidRequest, fmt.Sprintf("send 1 to %d changes per request; got %d", raft.MaxBlocklistChanges, n))
		return
	}
	now := time.Now().UnixMilli()
	changes := make([]store.BlockChange, 0, n)
	res := BlocklistResult{Added: []string{}, Removed: []string{}}
	for _, add := range req.Add {
		v, err := store.ParseBlockEntry(add.Entry)
		if err != nil {
			writeProblem(w, r, problem.InvalidRequest, err.Error())
			return
		}
		kind := store.BlockKindBlock
		if add.Kind != "" {
			var ok bool
			if kind, ok = store.ParseBlockKind(add.Kind); !ok {
				writeProblem(w, r, problem.InvalidRequest, fmt.Sprintf("kind %q: want block or shortener", add.Kind))
				return
			}
		}
		if err := store.CheckBlockReason(add.Reason); err != nil {
			writeProblem(w, r, problem.InvalidRequest, err.Error())
			return
		}
		changes = append(changes, store.BlockChange{Entry: store.BlockEntry{Value: v, Kind: kind, Reason: add.Reason, AddedAt: now}})
		res.Added = append(res.Added, v)
	}
	for _, rm := range req.Remove {
		v, err := store.ParseBlockEntry(rm)
		if err != nil {
			writeProblem(w, r, problem.InvalidRequest, err.Error())
			return
		}
		changes = append(changes, store.BlockChange{Remove: true, Entry: store.BlockEntry{Value: v}})
		res.Removed = append(res.Removed, v)
	}
	if err := a.n.disk.writable(); err != nil {
		writeWriteError(w, r, err)
		return
	}
	index, err := a.n.raft.UpdateBlocklist(r.Context(), changes)
	if err != nil {
		writeWriteError(w, r, err)
		return
	}
	res.Index = index
	a.n.log.Info("blocklist updated", "added", len(res.Added), "removed", len(res.Removed), "index", index)
	writeJSON(w, http.StatusOK, res)
}

const (
	defaultBlocklistPage = 1000
	maxBlocklistPage     = 10000
)

func (a *adminServer) listBlocklist(w http.ResponseWriter, r *http.Request) {
	limit := defaultBlocklistPage
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxBlocklistPage {
			writeProblem(w, r, problem.InvalidRequest, fmt.Sprintf("limit must be an integer from 1 to %d", maxBlocklistPage))
			return
		}
		limit = n
	}
	entries, err := a.n.store.BlockEntries(r.URL.Query().Get("after"), limit+1)
	if err != nil {
		writeProblem(w, r, problem.Internal, err.Error())
		return
	}
	page := BlocklistPage{Entries: []BlocklistEntry{}, Total: a.n.store.Blocklist().Len()}
	if len(entries) > limit {
		entries = entries[:limit]
		page.Next = entries[limit-1].Value
	}
	for _, e := range entries {
		page.Entries = append(page.Entries, BlocklistEntry{Entry: e.Value, Kind: e.Kind.String(), Reason: e.Reason, AddedAt: time.UnixMilli(e.AddedAt).UTC()})
	}
	writeJSON(w, http.StatusOK, page)
}

// ownAddrs lists this node's listen addresses for the edge's self-link
// check: a destination on any of them would loop back here.
func (n *Node) ownAddrs() []string {
	addrs := []string{n.cfg.HTTPAddr, n.cfg.AdminAddr}
	if n.httpLn != nil {
		addrs = append(addrs, n.httpLn.Addr().String())
	}
	return addrs
}

// clusterAddrs lists the public and admin addresses gossip knows for the
// other nodes, for the same check: a link to another node loops through it.
func (n *Node) clusterAddrs() []string {
	g := n.gossip
	if g == nil {
		return nil
	}
	var out []string
	for _, m := range g.Members() {
		out = append(out, m.HTTPAddr, m.AdminAddr)
	}
	return out
}
