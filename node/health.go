package node

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/edge/problem"
	"github.com/waymark/waymark/ingest"
)

// Health check states in the detail.
const (
	checkPass = "pass"
	checkWarn = "warn" // worth a look; never takes the node out of rotation
	checkFail = "fail"
)

// HealthCheck is one line of the health detail.
type HealthCheck struct {
	Name  string  `json:"name"`
	State string  `json:"state"` // pass, warn or fail
	Value float64 `json:"value"`
	Limit float64 `json:"limit,omitempty"`
	Unit  string  `json:"unit,omitempty"`
	// Readiness marks the checks /readyz depends on: only what redirects
	// need. The others are reported, never acted on.
	Readiness bool   `json:"readiness"`
	Detail    string `json:"detail,omitempty"`
}

// HealthDetail is the answer of GET /readyz/detail.
type HealthDetail struct {
	Name   string        `json:"name"`
	Ready  bool          `json:"ready"`
	Checks []HealthCheck `json:"checks"`
}

// health runs every check. Readiness is the store answering reads and Raft
// as /readyz has always required; analytics shipping is reported only: an
// aggregator outage must not drain redirect nodes from load balancers.
func (n *Node) health() HealthDetail {
	d := HealthDetail{Name: n.cfg.Name, Ready: true}
	add := func(c HealthCheck) {
		if c.Readiness && c.State == checkFail {
			d.Ready = false
		}
		d.Checks = append(d.Checks, c)
	}

	store := HealthCheck{Name: "store", State: checkPass, Readiness: true, Unit: "applied_index"}
	if idx, err := n.store.AppliedIndex(); err != nil {
		store.State, store.Detail = checkFail, fmt.Sprintf("cannot read the store: %v", err)
	} else {
		store.Value = float64(idx)
	}
	add(store)

	raftCheck := HealthCheck{Name: "raft", State: checkPass, Readiness: true}
	ok, detail := n.raft.Ready()
	raftCheck.Detail = detail
	if !ok {
		raftCheck.State = checkFail
	} else if st := n.raft.Stats(); !st.LastContact.IsZero() {
		raftCheck.Detail = fmt.Sprintf("%s; last contact with leader %s ago", detail, time.Since(st.LastContact).Round(time.Millisecond))
	}
	add(raftCheck)
	if n.cfg.HasRole(RoleVoter) || n.cfg.HasRole(RoleEdge) {
		add(n.regionCheck())
	}

	if srv := n.edge.Load(); srv != nil {
		// Out of descriptors the node cannot take connections: out of the
		// load balancer until accepts work again.
		ln := HealthCheck{Name: "listener", State: checkPass, Readiness: true}
		var ok bool
		if ok, ln.Detail = srv.ListenerHealth(); !ok {
			ln.State = checkFail
		}
		add(ln)
	}

	if n.disk != nil {
		add(n.diskCheck())
	}
	if n.ch != nil {
		add(n.ch.healthCheck())
	}
	for _, c := range shipChecks(n.ingest.ShipStatus(), n.cfg) {
		add(c)
	}
	return d
}

// shipChecks reports analytics shipping: lag, backlog and set-aside
// segments. They warn; none of them is a readiness check.
func shipChecks(st ingest.ShipStatus, cfg Config) []HealthCheck {
	lag := HealthCheck{Name: "ship_lag", State: checkPass, Unit: "seconds",
		Value: st.OldestPendingAge.Seconds(), Limit: cfg.MaxShipLag.Seconds(),
		Detail: "age of the oldest event not yet acknowledged by the aggregator"}
	if st.OldestPendingAge > cfg.MaxShipLag {
		lag.State = checkWarn
		lag.Detail = fmt.Sprintf("events not shipped for %s (--max-ship-lag %s)", st.OldestPendingAge.Round(time.Second), cfg.MaxShipLag)
	}
	if !st.Configured {
		lag.Detail += "; no aggregator configured"
	} else if st.LastError != "" {
		lag.Detail += "; last error: " + st.LastError
	}
	pending := HealthCheck{Name: "pending_bytes", State: checkPass, Unit: "bytes",
		Value: float64(st.PendingBytes), Limit: float64(cfg.IngestMaxBytes),
		Detail: "unshipped segment bytes; past the limit new events are dropped"}
	if cfg.IngestMaxBytes > 0 && st.PendingBytes*10 >= cfg.IngestMaxBytes*9 {
		pending.State = checkWarn
	}
	bad := HealthCheck{Name: "bad_segments", State: checkPass, Unit: "files", Value: float64(st.BadSegments),
		Detail: "segments set aside as .bad, never shipped"}
	if st.BadSegments > 0 {
		bad.State = checkWarn
		bad.Detail = fmt.Sprintf("%d set aside as .bad; oldest %s from %s", st.BadSegments, st.OldestBad, st.OldestBadAt.UTC().Format(time.RFC3339))
	}
	return []HealthCheck{lag, pending, bad}
}

// ready is /readyz.
func (n *Node) ready() (bool, string) {
	d := n.health()
	for _, c := range d.Checks {
		if c.Readiness && c.State == checkFail {
			return false, c.Name + ": " + c.Detail
		}
	}
	for _, c := range d.Checks {
		if c.Name == "raft" {
			return true, c.Detail
		}
	}
	return true, ""
}

// serveHealthDetail is GET /readyz/detail: every check with its state and
// value as JSON; 200 when ready, 503 when not, like /readyz.
func (n *Node) serveHealthDetail(ctx *fasthttp.RequestCtx) {
	if !ctx.IsGet() && !ctx.IsHead() {
		ctx.Response.Header.Set("Allow", "GET, HEAD")
		ctx.Response.Header.Set("Allow", "GET, HEAD")
		problem.Write(ctx, problem.MethodNotAllowed, "GET or HEAD only")
		return
	}
	d := n.health()
	b, err := json.Marshal(d)
	if err != nil {
		problem.Write(ctx, problem.Internal, "cannot encode health detail")
		return
	}
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	if !d.Ready {
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
	}
	ctx.SetBody(append(b, '\n'))
}
