package node

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/waymark/waymark/edge/problem"
	"github.com/waymark/waymark/store"
)

// adminServer is the operator API: loopback by default, authenticated by
// the operator token, plain net/http because it is low-volume.
type adminServer struct {
	n   *Node
	ln  net.Listener
	srv *http.Server
}

func (n *Node) openAdmin() error {
	ln, err := net.Listen("tcp", n.cfg.AdminAddr)
	if err != nil {
		return fmt.Errorf("cannot listen on --admin-addr %q: %w", n.cfg.AdminAddr, err)
	}
	a := &adminServer{n: n, ln: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/owners", a.createOwner)
	mux.HandleFunc("POST /v1/owners/{id}/suspend", a.setSuspended(true))
	mux.HandleFunc("POST /v1/owners/{id}/unsuspend", a.setSuspended(false))
	mux.HandleFunc("GET /v1/status", a.status)
	mux.HandleFunc("GET /v1/raft/peers", a.raftPeers)
	mux.HandleFunc("GET /v1/members", a.members)
	mux.HandleFunc("GET /v1/events/count", a.eventsCount)
	mux.HandleFunc("GET /v1/events/tail", a.eventsTail)
	mux.HandleFunc("POST /v1/rollup/rebuild", a.rollupRebuild)
	mux.HandleFunc("POST /v1/join", a.join)
	mux.HandleFunc("POST /v1/leave", a.leave)
	mux.HandleFunc("POST /v1/raft/remove-peer", a.membership("remove-peer"))
	mux.HandleFunc("POST /v1/raft/transfer-leader", a.membership("transfer-leader"))
	mux.HandleFunc("GET /v1/snapshot", a.snapshotSave)
	mux.HandleFunc("PUT /v1/snapshot", a.snapshotRestore)
	mux.HandleFunc("GET /v1/regions", a.listRegions)
	mux.HandleFunc("POST /v1/regions", a.claimRegion)
	mux.HandleFunc("GET /v1/blocklist", a.listBlocklist)
	mux.HandleFunc("POST /v1/blocklist", a.updateBlocklist)
	mux.HandleFunc("GET /v1/links/{code}", a.showLink)
	mux.HandleFunc("GET /v1/links/{code}/history", a.linkHistory)
	mux.HandleFunc("POST /v1/links/{code}/block", a.blockLink)
	mux.HandleFunc("POST /v1/links/{code}/review", a.reviewLink)
	mux.HandleFunc("POST /v1/links/{code}/restore", a.restoreLink)
	mux.HandleFunc("GET /v1/reports", a.listReports)
	mux.HandleFunc("POST /v1/reports/{id}/resolve", a.resolveReport)
	mux.HandleFunc("POST /v1/keys", a.createKey)
	mux.HandleFunc("GET /v1/keys", a.listKeys)
	mux.HandleFunc("DELETE /v1/keys/{id}", a.revokeKey)
	mux.HandleFunc("GET /v1/domains", a.listDomains)
	mux.HandleFunc("POST /v1/domains", a.addDomain)
	mux.HandleFunc("POST /v1/domains/{domain}/approve", a.approveDomain)
	// Go's profiler, behind the operator token like everything here: a
	// CPU profile of a node under load is how its costs are found
	// (`curl -H "Authorization: Bearer $(cat DATA_DIR/operator-token)"
	// ADMIN/debug/pprof/profile?seconds=20`).
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	// Everything else is a problem too, not net/http's plain-text 404.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, problem.NotFound, "there is no operator endpoint "+r.Method+" "+r.URL.Path)
	})
	a.srv = &http.Server{
		Handler:           a.auth(mux),
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          nil,
	}
	n.admin = a
	go a.srv.Serve(ln)
	if err := writeFileAtomic(filepath.Join(n.cfg.DataDir, AdminAddrFile), []byte(ln.Addr().String()+"\n"), 0o600); err != nil {
		return err
	}
	n.log.Info("admin listening", "addr", ln.Addr().String())
	return nil
}

func (a *adminServer) addr() string { return a.ln.Addr().String() }

func (a *adminServer) Close(ctx context.Context) error { return a.srv.Shutdown(ctx) }

func (a *adminServer) auth(next http.Handler) http.Handler {
	want := []byte("Bearer " + a.n.operToken)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			writeProblem(w, r, "unauthorized", "missing or wrong operator token (see DATA_DIR/operator-token)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// decodeName reads a {"name": "..."} body, or answers 400 and returns
// false.
func decodeName(w http.ResponseWriter, r *http.Request) (string, bool) {
	var req struct {
		Name string `json:"name"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeProblem(w, r, problem.InvalidRequest, `body must be {"name": "..."}`)
		return "", false
	}
	return req.Name, true
}

func (a *adminServer) createOwner(w http.ResponseWriter, r *http.Request) {
	var req struct{ Name string }
	var ok bool
	if req.Name, ok = decodeName(w, r); !ok {
		return
	}
	o, key, err := a.n.CreateOwner(r.Context(), strings.TrimSpace(req.Name))
	if err != nil {
		writeWriteError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"id": o.ID, "name": o.Name, "api_key": key, "created_at": time.UnixMilli(o.CreatedAt).UTC()})
}

// Status is what `waymark status` shows about one node.
type Status struct {
	Name         string    `json:"name"`
	Region       string    `json:"region"`
	Roles        []Role    `json:"roles"`
	Version      string    `json:"version"`
	HTTPAddr     string    `json:"http_addr"`
	RaftAddr     string    `json:"raft_addr"`
	RaftState    string    `json:"raft_state"`
	Leader       string    `json:"leader"`
	AppliedIndex uint64    `json:"applied_index"`
	CommitIndex  uint64    `json:"commit_index"`
	LastContact  string    `json:"last_contact"`
	Ready        bool      `json:"ready"`
	ReadyDetail  string    `json:"ready_detail"`
	Uptime       string    `json:"uptime"`
	StartedAt    time.Time `json:"started_at"`
	StoreBytes   uint64    `json:"store_bytes"`
	CacheEntries int64     `json:"cache_entries"`
	Members      int       `json:"members"`
	Shipping     Shipping  `json:"shipping"`
}

// Shipping is the analytics shipping part of Status. It never affects
// readiness; MaxShipLagSeconds is only the warning threshold.
type Shipping struct {
	AggregatorURL        string     `json:"aggregator_url"`
	OldestPendingSeconds float64    `json:"oldest_pending_seconds"`
	MaxShipLagSeconds    float64    `json:"max_ship_lag_seconds"`
	PendingBytes         int64      `json:"pending_bytes"`
	BadSegments          int        `json:"bad_segments"`
	OldestBad            string     `json:"oldest_bad,omitempty"`
	OldestBadAt          *time.Time `json:"oldest_bad_at,omitempty"`
	RejectedMalformed    uint64     `json:"rejected_malformed"`
	Conflicts            uint64     `json:"conflicts"`
	LastShipped          *time.Time `json:"last_shipped,omitempty"`
	LastError            string     `json:"last_error,omitempty"`
}

func (n *Node) shipping() Shipping {
	st := n.ingest.ShipStatus()
	sh := Shipping{
		AggregatorURL:        n.aggregatorURL(),
		OldestPendingSeconds: st.OldestPendingAge.Seconds(),
		MaxShipLagSeconds:    n.cfg.MaxShipLag.Seconds(),
		PendingBytes:         st.PendingBytes,
		BadSegments:          st.BadSegments,
		OldestBad:            st.OldestBad,
		RejectedMalformed:    st.RejectedMalformed,
		Conflicts:            st.Conflicts,
		LastError:            st.LastError,
	}
	if !st.OldestBadAt.IsZero() {
		at := st.OldestBadAt.UTC()
		sh.OldestBadAt = &at
	}
	if !st.LastShipped.IsZero() {
		at := st.LastShipped.UTC()
		sh.LastShipped = &at
	}
	return sh
}

func (a *adminServer) status(w http.ResponseWriter, r *http.Request) {
	n := a.n
	st := n.raft.Stats()
	ok, detail := n.ready()
	m := n.store.Metrics()
	writeJSON(w, http.StatusOK, Status{
		Name: n.cfg.Name, Region: n.cfg.Region, Roles: n.cfg.Roles, Version: Version,
		HTTPAddr: n.HTTPAddr(), RaftAddr: n.raft.Addr(),
		RaftState: st.State, Leader: st.LeaderID,
		AppliedIndex: st.AppliedIndex, CommitIndex: st.CommitIndex,
		LastContact: lastContact(st.LastContact),
		Ready:       ok, ReadyDetail: detail,
		Uptime:       time.Since(n.started).Round(time.Second).String(),
		StartedAt:    n.started.UTC(),
		StoreBytes:   m.DiskSpaceUsage(),
		CacheEntries: n.edge.Load().CacheEntries(),
		Members:      len(n.gossip.Members()),
		Shipping:     n.shipping(),
	})
}

func lastContact(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return time.Since(t).Round(time.Millisecond).String()
}

// Peer is one server of the Raft configuration as `waymark raft peers`
// shows it.
type Peer struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	Suffrage string `json:"suffrage"`
	Leader   bool   `json:"leader"`
	Applied  int64  `json:"applied_index"` // -1 when the peer did not answer
	Trailing int64  `json:"trailing"`
}

func (a *adminServer) raftPeers(w http.ResponseWriter, r *http.Request) {
	peers, err := a.n.raftPeers(r.Context())
	if err != nil {
		writeProblem(w, r, "unavailable", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, peers)
}

func (n *Node) raftPeers(ctx context.Context) ([]Peer, error) {
	servers, err := n.raft.Servers()
	if err != nil {
		return nil, fmt.Errorf("cannot read raft configuration: %w", err)
	}
	st := n.raft.Stats()
	peers := make([]Peer, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		p := &peers[i]
		*p = Peer{ID: s.ID, Address: s.Address, Suffrage: "nonvoter", Leader: s.ID == st.LeaderID, Applied: -1}
		if s.Voter {
			p.Suffrage = "voter"
		}
		addr, ok := n.httpAddrOf(s.ID)
		if !ok {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			b, _, err := n.peers.do(c, addr, internalStatus, nil)
			var is InternalStatus
			if err != nil || json.Unmarshal(b, &is) != nil {
				return
			}
			p.Applied = int64(is.AppliedIndex)
		}()
	}
	wg.Wait()
	// Trailing is measured against the highest applied index seen: on the
	// leader that is its own, the freshest in the cluster.
	var top int64
	for _, p := range peers {
		top = max(top, p.Applied)
	}
	for i := range peers {
		if peers[i].Applied >= 0 {
			peers[i].Trailing = top - peers[i].Applied
		}
	}
	return peers, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// writeProblem answers an RFC 9457 problem from the catalogue the public
// API uses, so a type name has one title and status everywhere.
func writeProblem(w http.ResponseWriter, r *http.Request, typ, detail string) {
	problem.WriteHTTP(w, r, typ, detail)
}

func writeWriteError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, errInvalidOwnerName):
		writeProblem(w, r, problem.InvalidRequest, err.Error())
	case errors.Is(err, store.ErrNoLeader) || errors.Is(err, store.ErrUnknownOutcome):
		w.Header().Set("Retry-After", "1")
		writeProblem(w, r, problem.Unavailable, err.Error())
	case errors.Is(err, store.ErrStorageFull):
		w.Header().Set("Retry-After", "5")
		writeProblem(w, r, problem.StorageFull, err.Error())
	default:
		writeProblem(w, r, problem.Internal, err.Error())
	}
}

func (a *adminServer) members(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, a.n.gossip.Members())
}

func (a *adminServer) join(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Addrs []string `json:"addrs"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&req); err != nil || len(req.Addrs) == 0 {
		writeProblem(w, r, "invalid-request", `body must be {"addrs": ["host:port", ...]}`)
		return
	}
	n, err := a.n.gossip.Join(req.Addrs)
	if err != nil {
		writeProblem(w, r, "join-failed", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"contacted": n})
}

func (a *adminServer) leave(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	if err := a.n.Leave(ctx); err != nil {
		writeProblem(w, r, "leave-failed", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"left": a.n.cfg.Name})
}

func (a *adminServer) membership(op string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		req := MembershipRequest{Op: op}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil {
			writeProblem(w, r, "invalid-request", `body must be {"id": "..."}`)
			return
		}
		req.Op = op
		if op == "remove-peer" && req.ID == "" {
			writeProblem(w, r, "invalid-request", "remove-peer needs a peer id")
			return
		}
		if op == "remove-peer" && req.ID == a.n.cfg.Name && a.n.raft.IsLeader() {
			writeProblem(w, r, problem.Conflict, "cannot remove the leader from itself; transfer leadership first or use `waymark leave`")
			return
		}
		err := a.n.changeMembership(r.Context(), req)
		switch {
		case err == nil:
			writeJSON(w, http.StatusOK, map[string]string{"done": op, "id": req.ID})
		case errors.Is(err, errUnknownPeer):
			writeProblem(w, r, "not-found", err.Error())
		default:
			writeWriteError(w, r, err)
		}
	}
}
