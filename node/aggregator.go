package node

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/waymark/waymark/edge/problem"
	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup"
	"github.com/waymark/waymark/rollup/clickhouse"
	"github.com/waymark/waymark/rollup/query"
)

// openAggregator starts the rollup receiver on nodes with the aggregator
// role. Segments arrive on the public port at ingest.ShipPath, authenticated
// by the cluster token.
func (n *Node) openAggregator() error {
	if !n.cfg.HasRole(RoleAggregator) {
		return nil
	}
	if n.cfg.AnalyticsStore == StoreClickHouse {
		return n.openClickHouse()
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

// aggregatorURL is the aggregator this node proxies stats to and shows
// in its status: the first --aggregator-url, or itself when it
// aggregates. (Segments ship to every aggregator: shipTargets.)
func (n *Node) aggregatorURL() string {
	if urls := n.cfg.aggregatorURLs(); len(urls) > 0 {
		return urls[0]
	}
	if n.cfg.HasRole(RoleAggregator) {
		return "http://" + n.httpLn.Addr().String()
	}
	return ""
}

// selfAggregatedDefer is the ingest pipeline's DeferShipWhileBusy: the
// configured hold when this node's own embedded aggregator folds its
// events (they share its CPUs), none when they ship to another node or
// into ClickHouse, which folds nothing here.
func (n *Node) selfAggregatedDefer() time.Duration {
	if n.cfg.AggregatorURL == "" && n.cfg.HasRole(RoleAggregator) && n.cfg.AnalyticsStore != StoreClickHouse {
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
	var c uint64
	var err error
	switch {
	case a.n.agg != nil:
		c, err = a.n.agg.Count(a.eventsFilter(r))
	case a.n.ch != nil:
		c, err = a.n.ch.backend.CountEvents(chEventFilter(a.eventsFilter(r)))
	default:
		a.notEmbedded(w, r)
		return
	}
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
	if a.n.agg == nil && a.n.ch == nil {
		a.notEmbedded(w, r)
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
	var evs []ingest.Event
	var err error
	if a.n.agg != nil {
		evs, err = a.n.agg.Tail(limit, a.eventsFilter(r))
	} else {
		evs, err = a.n.ch.backend.TailEvents(limit, chEventFilter(a.eventsFilter(r)))
	}
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

// chEventFilter is f for the ClickHouse backend, which does not import
// package rollup.
func chEventFilter(f rollup.Filter) clickhouse.EventFilter {
	return clickhouse.EventFilter{Code: f.Code, SiteID: f.SiteID, BotsOnly: f.BotsOnly}
}

func tailEvent(ev *ingest.Event) TailEvent {
	return TailEvent{
		Time: time.UnixMilli(ev.Time).UTC(), Kind: ev.Kind.String(), Code: ev.Code, Site: ev.SiteID, Name: ev.Name,
		Path: ev.Path, Referrer: ev.ReferrerHost, Country: ev.Country, Device: ev.Device, Browser: ev.Browser,
		Bot: ev.Bot(), Node: ev.Node,
	}
}

func (a *adminServer) rollupRebuild(w http.ResponseWriter, r *http.Request) {
	if a.n.agg == nil && a.n.ch == nil {
		a.notEmbedded(w, r)
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
	if a.n.ch != nil {
		// ClickHouse keeps the raw events: a rebuild writes the closed
		// hours' site and link rows of those days again from them.
		hours, err := a.n.ch.backend.Rematerialize(r.Context(), from, to.AddDate(0, 0, 1))
		if err != nil {
			writeProblem(w, r, "internal", err.Error())
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"from": req.From, "to": req.To, "hours": hours, "took": time.Since(t0).Round(time.Millisecond).String()})
		return
	}
	if err := a.n.agg.Rebuild(from, to); err != nil {
		writeProblem(w, r, "internal", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"from": req.From, "to": req.To, "took": time.Since(t0).Round(time.Millisecond).String()})
}

// analytics is the backend this node answers stats from: the embedded
// aggregator or ClickHouse; nil on a node without the aggregator role.
func (n *Node) analytics() query.Backend {
	switch {
	case n.agg != nil:
		return n.agg
	case n.ch != nil:
		return n.ch.backend
	}
	return nil
}

// shipTargets are the aggregators this node ships segments to, asked by
// the shipper before every round (ingest.Config.Aggregators): the
// --aggregator-url list, named by URL; without one, the members gossip
// knows with the aggregator role, named by node name (a dead one stays
// listed, not alive: the split goes on and its partitions move; one that
// left is dropped); without those, this node when it aggregates. Every
// node given the same list, or seeing the same membership, ranks the
// same names (DESIGN.md of ingest, "Several aggregators").
func (n *Node) shipTargets() []ingest.Aggregator {
	if urls := n.cfg.aggregatorURLs(); len(urls) > 0 {
		out := make([]ingest.Aggregator, len(urls))
		for i, u := range urls {
			out[i] = ingest.Aggregator{Name: u, URL: peerURL(u), Alive: true}
		}
		return out
	}
	var out []ingest.Aggregator
	if g := n.gossipShared.Load(); g != nil {
		for _, m := range g.Members() {
			if m.Status == "left" || !slices.Contains(m.Roles, RoleAggregator) || m.HTTPAddr == "" {
				continue
			}
			out = append(out, ingest.Aggregator{Name: m.Name, URL: peerURL("http://" + m.HTTPAddr), Alive: m.Status == "alive"})
		}
	}
	if len(out) == 0 && n.cfg.HasRole(RoleAggregator) && n.httpLn != nil {
		out = append(out, ingest.Aggregator{Name: n.cfg.Name, URL: peerURL("http://" + n.httpLn.Addr().String()), Alive: true})
	}
	return out
}

// notEmbedded answers an admin call that needs the embedded aggregator
// (rollup rebuild; events count and tail answer from ClickHouse too).
func (a *adminServer) notEmbedded(w http.ResponseWriter, r *http.Request) {
	if a.n.ch != nil {
		writeProblem(w, r, "not-aggregator", "this aggregator keeps analytics in ClickHouse (--analytics-store clickhouse), which has no rollups to rebuild: every answer is read from the raw events")
		return
	}
	writeProblem(w, r, "not-aggregator", "this node does not have the aggregator role; ask the aggregator node")
}
