package node

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/edge"
	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/raft"
	"github.com/waymark/waymark/rollup"
	"github.com/waymark/waymark/rollup/api"
	"github.com/waymark/waymark/store"
)

// Version is the node software version, advertised to operators.
const Version = "0.1.0"

// Node is one running Waymark process: every component it started, kept so
// that Close can stop them in reverse order.
type Node struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics.Set

	store  *store.Store
	ingest *ingest.Pipeline
	sites  *ingest.Sites
	salts  *ingest.LocalSalts
	agg    *rollup.Aggregator
	ch     *chAggregator // the aggregator with --analytics-store clickhouse
	raft   *raft.Node
	edge   atomic.Pointer[edge.Server]
	admin  *adminServer
	// suspended is the in-memory set of suspended owners, loaded from the
	// store before raft replays anything and kept by the FSM (owners_abuse.go).
	suspended *edge.OwnerSet
	// clicks is the aggregator's link.clicked webhook outbox and
	// whMetrics the waymark_webhook_* series (webhooks.go).
	clicks    *clickOutbox
	whOnce    sync.Once
	whMetrics *webhookMetrics

	gossip *Gossip
	// gossipShared is gossip for goroutines started before it (the
	// shipper asks it for the aggregators): set once, read atomically.
	gossipShared atomic.Pointer[Gossip]
	removals     *operatorRemovals // members an operator removed from Raft (removals.go)
	peers        *peerClient
	disk         *diskGuard
	peerTLS      *peerTLS

	httpLn        net.Listener
	started       time.Time
	operToken     string
	internalToken string

	bg       sync.WaitGroup // background loops (reconciler, bootstrap)
	bgCancel context.CancelFunc
	exit     chan struct{} // a graceful leave asks the process to stop
	failed   chan error    // a fatal fault asks the process to stop with an error
	failOnce sync.Once
}

// Failed delivers the fault that makes the node unable to go on (its
// public listener died); the runner stops it and exits non-zero.
func (n *Node) Failed() <-chan error { return n.failed }

func (n *Node) fail(err error) {
	n.failOnce.Do(func() { n.failed <- err })
}

// Exit is closed-over by the runner: a value arrives when the node left the
// cluster and the process should stop.
func (n *Node) Exit() <-chan struct{} { return n.exit }

// Start brings a node up and returns once every listener is bound. The
// steps read top to bottom in start order; Close undoes them bottom up.
func Start(ctx context.Context, cfg Config, log *slog.Logger) (_ *Node, err error) {
	n := &Node{cfg: cfg, log: log, metrics: metrics.NewSet(), started: time.Now(), exit: make(chan struct{}, 1), failed: make(chan error, 1), removals: newOperatorRemovals()}
	bgCtx, bgCancel := context.WithCancel(context.Background())
	n.bgCancel = bgCancel
	defer func() {
		if err != nil {
			n.Close(context.Background())
		}
	}()
	phase := func(name string, fn func() error) error {
		t0 := time.Now()
		if err := fn(); err != nil {
			return err
		}
		log.Info("started "+name, "took", time.Since(t0).Round(time.Microsecond))
		return nil
	}

	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("cannot create data folder %q: %w", cfg.DataDir, err)
	}
	token, created, err := loadOrCreateSecret(cfg.DataDir, OperatorTokenFile, func() string { return randomHex(32) })
	if err != nil {
		return nil, err
	}
	n.operToken = token
	if created {
		log.Info("wrote operator token", "path", filepath.Join(cfg.DataDir, OperatorTokenFile))
	}

	clusterKey, err := n.clusterKey()
	if err != nil {
		return nil, err
	}
	n.internalToken = internalToken(clusterKey)
	if err := n.openPeerTLS(clusterKey); err != nil {
		return nil, err
	}
	n.peers = newPeerClient(n.internalToken, n.peerTLS.clientConfig())

	// The public listener is bound first so its real address (port 0) is
	// known to everything that advertises it. Other nodes reach the
	// internal endpoints on it over mutual TLS (mtls.go).
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on --http-addr %q: %w", cfg.HTTPAddr, err)
	}
	n.httpLn = ln
	publicURL := cfg.PublicURL
	if publicURL == "" {
		publicURL = "http://" + n.httpLn.Addr().String()
	}

	if len(cfg.BlockedHosts) > 0 {
		log.Warn("--blocked-hosts is deprecated: it only applies to creates and edits on this node; use `waymark blocklist add` (or `blocklist import`), which every node applies, existing links included",
			"hosts", len(cfg.BlockedHosts))
	}
	n.openDiskGuard(bgCtx)
	if err := phase("store", n.openStore); err != nil {
		return nil, err
	}
	if err := phase("ingest", n.openIngest); err != nil {
		return nil, err
	}
	if cfg.HasRole(RoleAggregator) {
		if err := phase("aggregator", n.openAggregator); err != nil {
			return nil, err
		}
	}
	if err := phase("raft", n.openRaft); err != nil {
		return nil, err
	}
	if err := phase("edge", func() error { return n.openEdge(publicURL) }); err != nil {
		return nil, err
	}
	n.startKeyUseFlush(bgCtx)
	n.startWebhooks(bgCtx)
	if err := phase("admin", n.openAdmin); err != nil {
		return nil, err
	}
	if err := phase("gossip", func() error { return n.openGossip(bgCtx, clusterKey) }); err != nil {
		return nil, err
	}
	// Logged last: scripts and tests wait for this line, and by now every
	// other listener is bound and logged too.
	log.Info("http listening", "addr", n.httpLn.Addr().String(), "public_url", publicURL)

	if cfg.Dev {
		if err := n.devSetup(ctx); err != nil {
			return nil, err
		}
	}
	n.warnUnclaimedRegion(bgCtx)
	log.Info("node ready", "name", cfg.Name, "region", cfg.Region, "roles", fmt.Sprint(cfg.Roles), "took", time.Since(n.started).Round(time.Millisecond))
	return n, nil
}

func (n *Node) openStore() error {
	var err error
	n.store, err = store.Open(filepath.Join(n.cfg.DataDir, "store"), store.Options{
		BlockCacheBytes: n.cfg.BlockCacheBytes,
		Logger:          n.log.With("component", "store"),
	})
	return err
}

func (n *Node) openIngest() error {
	sites := ingest.NewSites()
	n.sites = sites
	if err := n.openSalts(); err != nil {
		return err
	}
	all, err := n.store.Sites()
	if err != nil {
		return err
	}
	for _, s := range all {
		sites.Put(s)
	}
	n.ingest, err = ingest.Open(ingest.Config{
		Dir:             filepath.Join(n.cfg.DataDir, "segments"),
		NodeID:          n.cfg.Name,
		Region:          n.cfg.Region,
		Aggregators:     n.shipTargets,
		ShipToken:       n.internalToken,
		HTTPClient:      &http.Client{Timeout: 30 * time.Second, Transport: peerTransport(n.peerTLS.clientConfig())},
		IPRate:          n.cfg.IngestIPRate,
		SiteRate:        n.cfg.IngestSiteRate,
		SiteBurst:       n.cfg.IngestSiteRate * 2,
		MaxPendingBytes: n.cfg.IngestMaxBytes,
		// Only where the aggregation shares this process's CPUs.
		DeferShipWhileBusy: n.selfAggregatedDefer(),
		IPBurst:            n.cfg.IngestIPRate * 10,
		TrustedProxies:     n.cfg.TrustedProxies,
		CountryHeader:      n.cfg.CountryHeader,
		GeoIPPath:          n.cfg.GeoIPPath,
		Sites:              sites,
		Salts:              n.salts,
		Logger:             n.log,
		Metrics:            n.metrics,
		Now:                time.Now,
	})
	return err
}

func (n *Node) openRaft() error {
	if err := n.loadSuspended(); err != nil {
		return err
	}
	var err error
	n.raft, err = raft.Open(raft.Config{
		NodeID:            n.cfg.Name,
		Region:            n.cfg.Region,
		Dir:               filepath.Join(n.cfg.DataDir, "raft"),
		BindAddr:          n.cfg.RaftAddr,
		AdvertiseAddr:     n.cfg.RaftAdvertise,
		SnapshotInterval:  n.cfg.SnapshotInterval,
		SnapshotThreshold: n.cfg.SnapshotThreshold,
		TrailingLogs:      n.cfg.TrailingLogs,
		TLS:               n.peerTLS.raftConfig(),
		TLSInbound:        raftInbound,
		Bootstrap:         n.cfg.Dev && n.cfg.BootstrapExpect == 0,
		Forward:           n.forward,
		ApplyTimeout:      n.cfg.ApplyTimeout,
		LogGuard:          n.disk.writable,
		Logger:            n.log,
		Metrics:           n.metrics,
		OnChanging: func(code string) {
			if srv := n.edge.Load(); srv != nil {
				srv.BeginChange(code)
			}
		},
		OnChange: func(code string) {
			if srv := n.edge.Load(); srv != nil {
				srv.EndChange(code)
			}
		},
		OnSite: n.sites.Put,
		OnRestore: func() {
			n.reloadSuspended()
			if srv := n.edge.Load(); srv != nil {
				srv.InvalidateAll()
			}
			if all, err := n.store.Sites(); err == nil {
				n.sites.Replace(all)
			} else {
				n.log.Error("cannot reload sites after a snapshot restore; the event endpoint may use stale ones", "err", err)
			}
		},

		// Issue 11: the suspended-owner set and the purge (owners_abuse.go).
		OnOwnerSuspended: n.suspended.Set,
		PurgeAfter:       purgeAfter(n.cfg.PurgeAfter),

		// Issue 12: a revoked API key leaves the edge's cache (keys.go).
		OnKeyRevoked: n.onKeyRevoked,
	}, n.store)
	if err != nil {
		return err
	}
	n.log.Info("raft listening", "addr", n.raft.Addr())
	return nil
}

func (n *Node) openEdge(publicURL string) error {
	srv, err := edge.New(edge.Config{
		PublicURL:     publicURL,
		CacheEntries:  n.cfg.CacheEntries,
		PrivateMaxAge: n.cfg.PrivateMaxAge,
		BlockedHosts:  n.cfg.BlockedHosts,
		OwnAddrs:      n.ownAddrs(),
		ClusterAddrs:  n.clusterAddrs,
		ApplyTimeout:  n.cfg.ApplyTimeout,
		Ready:         n.ready,
		WriteMetrics:  n.writeMetrics,
		Routes:        n.publicRoutes(),
		APIFallback:   n.apiFallback(n.statsHandler()),
		Shares:        n.shareConfig(), // issue 13: shared dashboards (shares.go)
		OnRedirect:    n.onRedirect(),
		WriteRate:     n.cfg.WriteRate,
		Reports:       edge.ReportConfig{PerIPBurst: float64(n.cfg.ReportBurst)},
		Remote:        n.remoteLink,
		MaybeFresh:    n.maybeFresh,
		RemoteKey:     n.remoteKey,
		BodyLimits:    n.bodyLimits(),
		MaxConns:      n.cfg.MaxConns,
		MaxConnsPerIP: n.cfg.MaxConnsPerIP,
		WrapConn:      sniffWrapper(n.peerTLS.serverConfig()),
		Logger:        n.log,
		Metrics:       n.metrics,
		Now:           time.Now,

		// Issue 11: 0 takes the edge's default (1 h); --edit-review 0 is off.
		PermanentMaxAge: n.cfg.PermanentMaxAge,
		EditReview:      editReview(n.cfg.EditReview),

		// Issue 11: create limits and owner suspension (owners_abuse.go).
		CreateRateIP:     createRate(n.cfg.CreateRateIP),
		CreateRateKey:    createRate(n.cfg.CreateRateKey),
		CreateRateDomain: createRate(n.cfg.CreateRateDomain),
		TrustedProxies:   n.cfg.TrustedProxies,
		SuspendedOwners:  n.suspended,

		// Issue 13: redirect rules (rules.go).
		OnRuleRedirect: n.onRuleRedirect(),
		Classifier:     n.ruleClassifier(),
		// Issue 13 point 5: webhooks (webhooks.go).
		WebhookAllowPrivate: n.cfg.Webhooks.AllowPrivate,
	}, n.store, guardedWriter{n.raft, n.disk})
	if err != nil {
		return err
	}
	n.edge.Store(srv)
	go func() {
		// Serve returns nil on shutdown. An error means the listener is
		// gone: readiness already fails (ListenerHealth), and a node that
		// cannot serve its public port must not linger as a process that
		// looks alive, so it stops with an error for its supervisor.
		if err := srv.Serve(n.httpLn); err != nil {
			n.log.Error("public HTTP listener failed; stopping the node", "err", err)
			n.fail(err)
		}
	}()
	return nil
}

func (n *Node) writeMetrics(w io.Writer) {
	n.metrics.WritePrometheus(w)
	metrics.WriteProcessMetrics(w)
}

// Close stops everything Start started, in reverse order. It is safe on a
// partly started node.
func (n *Node) Close(ctx context.Context) error {
	var errs []error
	step := func(name string, fn func() error) {
		t0 := time.Now()
		if err := fn(); err != nil {
			errs = append(errs, fmt.Errorf("cannot stop %s: %w", name, err))
			n.log.Error("stop failed", "component", name, "err", err)
			return
		}
		n.log.Info("stopped "+name, "took", time.Since(t0).Round(time.Microsecond))
	}
	if n.bgCancel != nil {
		n.bgCancel()
	}
	if n.gossip != nil {
		step("gossip", n.gossip.Shutdown)
	}
	n.bg.Wait()
	if n.admin != nil {
		step("admin", func() error { return n.admin.Close(ctx) })
	}
	if srv := n.edge.Load(); srv != nil {
		step("edge", func() error { return srv.Shutdown(ctx) })
	} else if n.httpLn != nil {
		n.httpLn.Close()
	}
	if n.salts != nil {
		n.salts.Release() // a writer waiting for the cluster's salt goes on
	}
	if n.ingest != nil {
		step("ingest", func() error { return n.ingest.Close(ctx) })
	}
	if n.raft != nil {
		step("raft", n.raft.Close)
	}
	if n.agg != nil {
		step("aggregator", n.agg.Close)
	}
	if n.ch != nil {
		step("clickhouse", n.ch.close)
	}
	if n.store != nil {
		step("store", n.store.Close)
	}
	return errors.Join(errs...)
}

// HTTPAddr is the bound public address.
func (n *Node) HTTPAddr() string { return n.httpLn.Addr().String() }

// AdminAddr is the bound operator API address.
func (n *Node) AdminAddr() string { return n.admin.addr() }

// publicRoutes are the extra exact paths the edge serves besides links.
func (n *Node) publicRoutes() map[string]fasthttp.RequestHandler {
	routes := n.internalRoutes()
	routes["/s.js"] = n.ingest.ScriptHandler()
	routes["/api/event"] = n.ingest.EventHandler()
	routes["/api/v2/query"] = n.statsHandler()
	routes["/dashboard"] = api.DashboardHandler()
	routes["/readyz/detail"] = n.serveHealthDetail
	if n.agg != nil {
		// Batches the aggregator cannot store are refused whole: the
		// shipper keeps the segments and retries.
		routes[ingest.ShipPath] = requirePeer(n.refuseWhenFull(n.agg.SegmentsHandler()))
	}
	if n.ch != nil {
		// ClickHouse's own disk is not this node's: no disk guard.
		routes[ingest.ShipPath] = requirePeer(n.ch.handler)
	}
	return routes
}

// clusterKey returns the configured key; a --dev node without one makes
// its own and keeps it in the data folder so restarts agree with it.
func (n *Node) clusterKey() ([]byte, error) {
	if n.cfg.ClusterKey != nil {
		return n.cfg.ClusterKey, nil
	}
	text, _, err := loadOrCreateSecret(n.cfg.DataDir, "cluster-key", func() string {
		return base64.StdEncoding.EncodeToString([]byte(randomHex(ClusterKeySize / 2)))
	})
	if err != nil {
		return nil, err
	}
	key, err := base64.StdEncoding.DecodeString(text)
	if err != nil || len(key) != ClusterKeySize {
		return nil, fmt.Errorf("cannot use %s/cluster-key: want %d bytes of base64", n.cfg.DataDir, ClusterKeySize)
	}
	return key, nil
}

// openPeerTLS loads --tls-cert/--tls-key/--tls-ca, or without them signs
// this node a certificate with the CA derived from the cluster key.
func (n *Node) openPeerTLS(clusterKey []byte) error {
	var err error
	if n.cfg.TLSCert != "" {
		n.peerTLS, err = loadPeerTLS(n.cfg.TLSCert, n.cfg.TLSKey, n.cfg.TLSCA)
		if err != nil {
			return err
		}
		if err := n.peerTLS.checkIdentity(n.cfg.Name, n.cfg.Roles); err != nil {
			return err
		}
		n.log.Info("node TLS from files", "cert", n.cfg.TLSCert, "ca", n.cfg.TLSCA, "expires", n.peerTLS.cert.Leaf.NotAfter)
		return nil
	}
	n.peerTLS, err = derivePeerTLS(clusterKey, n.cfg.Name, n.cfg.Roles, n.cfg.DataDir)
	if err != nil {
		return err
	}
	n.log.Info("node TLS from the CA derived from the cluster key (no --tls-cert)", "dir", filepath.Join(n.cfg.DataDir, tlsDirName))
	return nil
}

// peerURL turns a node's public http:// URL into the https:// one other
// nodes use for internal calls on the same port.
func peerURL(u string) string {
	if rest, ok := strings.CutPrefix(u, "http://"); ok {
		return "https://" + rest
	}
	return u
}

// openGossip joins memberlist, then starts the leader's reconciler, the
// midnight salt pruning and, for a fresh cluster, the --bootstrap-expect
// wait.
func (n *Node) openGossip(ctx context.Context, clusterKey []byte) error {
	events := make(chan MemberEvent, 256)
	g, err := StartGossip(GossipConfig{
		BindAddr:  n.cfg.GossipAddr,
		SecretKey: deriveKey(clusterKey, "gossip"),
		Meta: Meta{
			Name: n.cfg.Name, Region: n.cfg.Region, Roles: n.cfg.Roles, RaftAddr: n.raft.Addr(),
			HTTPAddr: n.HTTPAddr(), AdminAddr: n.admin.addr(), Version: Version, Boot: newBootID(),
		},
		Logger: n.log,
		Events: events,
		Salts:  n.salts,
	})
	if err != nil {
		return err
	}
	n.gossip = g
	n.gossipShared.Store(g)
	n.log.Info("gossip listening", "addr", g.Addr())
	if len(n.cfg.Join) > 0 {
		n.retryJoin(ctx, g)
	}
	n.startReconciler(ctx, events)
	n.pruneSaltsAtMidnight(ctx)
	if n.cfg.BootstrapExpect > 0 {
		n.bootstrapWhenExpected(ctx)
	}
	return nil
}

// bodyLimits are the routes that take more than the edge's default body
// limit: forwarded writes, and segment batches on aggregators. Every other
// route, the unauthenticated ones first, keeps the small default.
func (n *Node) bodyLimits() map[string]int {
	limits := map[string]int{internalApply: 1 << 20}
	if n.cfg.HasRole(RoleAggregator) {
		limits[ingest.ShipPath] = 16 << 20
	}
	return limits
}

// onRedirect is the click-capture hook, or nil with --capture-clicks=false.
func (n *Node) onRedirect() func(*fasthttp.RequestCtx, []byte) {
	if !n.cfg.CaptureClicks {
		return nil
	}
	return n.ingest.CaptureClick
}

// retryJoin joins the --join members, retrying in the background until one
// answers: nodes of a cluster may start in any order (Consul's retry-join).
func (n *Node) retryJoin(ctx context.Context, g *Gossip) {
	joined, err := g.Join(n.cfg.Join)
	if err == nil {
		n.log.Info("joined gossip", "contacted", joined)
		return
	}
	n.log.Warn("cannot join gossip yet; retrying in the background", "join", n.cfg.Join, "err", err)
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		for attempt := 1; ; attempt++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			joined, err := g.Join(n.cfg.Join)
			if err == nil {
				n.log.Info("joined gossip", "contacted", joined, "attempts", attempt+1)
				return
			}
			if attempt%10 == 0 {
				n.log.Warn("still cannot join gossip", "join", n.cfg.Join, "attempts", attempt+1, "err", err)
			}
		}
	}()
}
