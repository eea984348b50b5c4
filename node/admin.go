package node

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

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
	mux.HandleFunc("GET /v1/status", a.status)
	mux.HandleFunc("GET /v1/raft/peers", a.raftPeers)
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
			writeProblem(w, http.StatusUnauthorized, "unauthorized", "missing or wrong operator token (see DATA_DIR/operator-token)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (a *adminServer) createOwner(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name string `json:"name"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || strings.TrimSpace(req.Name) == "" {
		writeProblem(w, http.StatusBadRequest, "invalid-request", `body must be {"name": "..."} with a non-empty name`)
		return
	}
	o, key, err := a.n.CreateOwner(r.Context(), strings.TrimSpace(req.Name))
	if err != nil {
		writeWriteError(w, err)
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
		Uptime:     time.Since(n.started).Round(time.Second).String(),
		StartedAt:  n.started.UTC(),
		StoreBytes: m.DiskSpaceUsage(),
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
	Applied  uint64 `json:"applied_index"`
	Trailing uint64 `json:"trailing"`
}

func (a *adminServer) raftPeers(w http.ResponseWriter, r *http.Request) {
	peers, err := a.n.raftPeers()
	if err != nil {
		writeProblem(w, http.StatusServiceUnavailable, "unavailable", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, peers)
}

func (n *Node) raftPeers() ([]Peer, error) {
	f := n.raft.Raft().GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("cannot read raft configuration: %w", err)
	}
	st := n.raft.Stats()
	var peers []Peer
	for _, s := range f.Configuration().Servers {
		p := Peer{ID: string(s.ID), Address: string(s.Address), Suffrage: strings.ToLower(s.Suffrage.String()), Leader: string(s.ID) == st.LeaderID}
		if string(s.ID) == n.cfg.Name {
			p.Applied = st.AppliedIndex
			if st.CommitIndex > st.AppliedIndex {
				p.Trailing = st.CommitIndex - st.AppliedIndex
			}
		}
		peers = append(peers, p)
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

func writeProblem(w http.ResponseWriter, status int, typ, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{
		"type": "/problems/" + typ, "title": http.StatusText(status), "status": status, "detail": detail,
	})
}

func writeWriteError(w http.ResponseWriter, err error) {
	if errors.Is(err, store.ErrNoLeader) || errors.Is(err, store.ErrUnknownOutcome) {
		w.Header().Set("Retry-After", "1")
		writeProblem(w, http.StatusServiceUnavailable, "unavailable", err.Error())
		return
	}
	writeProblem(w, http.StatusInternalServerError, "internal", err.Error())
}
