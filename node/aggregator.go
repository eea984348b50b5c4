package node

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"github.com/waymark/waymark/edge/problem"
	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup"
)

// openAggregator starts the rollup receiver on nodes with the aggregator
// role. Segments arrive on the public port at ingest.ShipPath, authenticated
// by the cluster token.
func (n *Node) openAggregator() error {
	if !n.cfg.HasRole(RoleAggregator) {
		return nil
	}
	if err := n.openClickOutbox(); err != nil { // link.clicked webhooks (webhookclicks.go)
		return err
	}
	agg, err := rollup.Open(rollup.Config{
		Dir:       filepath.Join(n.cfg.DataDir, "aggregator"),
		Retention: n.cfg.Retention,
		Token:     n.internalToken,
		// Rollups wait in memory up to this long; a query writes them.
		CheckpointInterval: n.cfg.CheckpointInterval,
		// Click limits: the aggregator reads each link's limit from this
		// node's replica and takes the link down through Raft.
		Links:        authorizer{n: n}.Link,
		OnClickLimit: n.onClickLimit,
		Logger:       n.log,
		Metrics:      n.metrics,
		Now:          time.Now,

		// link.clicked webhooks (webhookclicks.go).
		OnStoredClicks: n.queueClicks,
	})
	if err != nil {
		return fmt.Errorf("cannot open aggregator: %w", err)
	}
	n.agg = agg
	return nil
}

// aggregatorURL is where this node ships its segments: the configured
// address, or itself when it aggregates.
func (n *Node) aggregatorURL() string {
	if n.cfg.AggregatorURL != "" {
		return n.cfg.AggregatorURL
	}
	if n.cfg.HasRole(RoleAggregator) {
		return "http://" + n.httpLn.Addr().String()
	}
	return ""
}

// selfAggregatedDefer is the ingest pipeline's DeferShipWhileBusy: the
// configured hold when this node's own aggregator folds its events (they
// share its CPUs), none when they ship to another node.
func (n *Node) selfAggregatedDefer() time.Duration {
	if n.cfg.AggregatorURL == "" && n.cfg.HasRole(RoleAggregator) {
		return n.cfg.DeferBusy
	}
	return 0
}

// EventsCount is the answer of `waymark events count`.
type EventsCount struct {
	Count uint64 `json:"count"`
}

func (a *adminServer) eventsFilter(r *http.Request) rollup.Filter {
	q := r.URL.Query()
	bots, _ := strconv.ParseBool(q.Get("bots"))
	return rollup.Filter{Code: q.Get("link"), SiteID: q.Get("site"), BotsOnly: bots}
}

func (a *adminServer) eventsCount(w http.ResponseWriter, r *http.Request) {
	if a.n.agg == nil {
		writeProblem(w, r, "not-aggregator", "this node does not have the aggregator role; ask the aggregator node")
		return
	}
	c, err := a.n.agg.Count(a.eventsFilter(r))
	if err != nil {
		writeProblem(w, r, "internal", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, EventsCount{Count: c})
}

// TailEvent is one event as `waymark events tail` shows it.
type TailEvent struct {
	Time     time.Time `json:"time"`
	Kind     string    `json:"kind"`
	Code     string    `json:"code,omitempty"`
	Site     string    `json:"site,omitempty"`
	Name     string    `json:"name,omitempty"`
	Path     string    `json:"path,omitempty"`
	Referrer string    `json:"referrer_host,omitempty"`
	Country  string    `json:"country,omitempty"`
	Device   string    `json:"device,omitempty"`
	Browser  string    `json:"browser,omitempty"`
	Bot      bool      `json:"bot"`
	Node     string    `json:"node"`
}

func (a *adminServer) eventsTail(w http.ResponseWriter, r *http.Request) {
	if a.n.agg == nil {
		writeProblem(w, r, "not-aggregator", "this node does not have the aggregator role; ask the aggregator node")
		return
	}
	limit := 20
	if v := r.URL.Query().Get("n"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > rollup.MaxTail {
			writeProblem(w, r, problem.InvalidRequest, fmt.Sprintf("n must be a whole number from 1 to %d", rollup.MaxTail))
			return
		}
		limit = n
	}
	evs, err := a.n.agg.Tail(limit, a.eventsFilter(r))
	if err != nil {
		writeProblem(w, r, "internal", err.Error())
		return
	}
	out := make([]TailEvent, 0, len(evs))
	for i := range evs {
		out = append(out, tailEvent(&evs[i]))
	}
	writeJSON(w, http.StatusOK, out)
}

func tailEvent(ev *ingest.Event) TailEvent {
	return TailEvent{
		Time: time.UnixMilli(ev.Time).UTC(), Kind: ev.Kind.String(), Code: ev.Code, Site: ev.SiteID, Name: ev.Name,
		Path: ev.Path, Referrer: ev.ReferrerHost, Country: ev.Country, Device: ev.Device, Browser: ev.Browser,
		Bot: ev.Bot(), Node: ev.Node,
	}
}

func (a *adminServer) rollupRebuild(w http.ResponseWriter, r *http.Request) {
	if a.n.agg == nil {
		writeProblem(w, r, "not-aggregator", "this node does not have the aggregator role; ask the aggregator node")
		return
	}
	var req struct {
		From string `json:"from"`
		To   string `json:"to"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil {
		writeProblem(w, r, "invalid-request", `body must be {"from": "YYYY-MM-DD", "to": "YYYY-MM-DD"}`)
		return
	}
	from, err1 := time.Parse(time.DateOnly, req.From)
	to, err2 := time.Parse(time.DateOnly, req.To)
	if err1 != nil || err2 != nil || to.Before(from) {
		writeProblem(w, r, "invalid-request", "from and to must be days YYYY-MM-DD with from <= to")
		return
	}
	t0 := time.Now()
	if err := a.n.agg.Rebuild(from, to); err != nil {
		writeProblem(w, r, "internal", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"from": req.From, "to": req.To, "took": time.Since(t0).Round(time.Millisecond).String()})
}
