package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/edge"
	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/raft"
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
	raft   *raft.Node
	edge   atomic.Pointer[edge.Server]
	admin  *adminServer

	httpLn    net.Listener
	httpDone  chan error
	started   time.Time
	operToken string
}

// Start brings a node up and returns once every listener is bound. The
// steps read top to bottom in start order; Close undoes them bottom up.
func Start(ctx context.Context, cfg Config, log *slog.Logger) (_ *Node, err error) {
	n := &Node{cfg: cfg, log: log, metrics: metrics.NewSet(), started: time.Now()}
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

	// The public listener is bound first so its real address (port 0) is
	// known to everything that advertises it.
	if n.httpLn, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		return nil, fmt.Errorf("cannot listen on --http-addr %q: %w", cfg.HTTPAddr, err)
	}
	publicURL := cfg.PublicURL
	if publicURL == "" {
		publicURL = "http://" + n.httpLn.Addr().String()
	}

	if err := phase("store", n.openStore); err != nil {
		return nil, err
	}
	if err := phase("ingest", n.openIngest); err != nil {
		return nil, err
	}
	if err := phase("raft", n.openRaft); err != nil {
		return nil, err
	}
	if err := phase("edge", func() error { return n.openEdge(publicURL) }); err != nil {
		return nil, err
	}
	if err := phase("admin", n.openAdmin); err != nil {
		return nil, err
	}
	log.Info("http listening", "addr", n.httpLn.Addr().String(), "public_url", publicURL)

	if cfg.Dev {
		if err := n.devSetup(ctx); err != nil {
			return nil, err
		}
	}
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
	all, err := n.store.Sites()
	if err != nil {
		return err
	}
	for _, s := range all {
		sites.Put(s)
	}
	n.ingest, err = ingest.Open(ingest.Config{
		Dir:            filepath.Join(n.cfg.DataDir, "segments"),
		NodeID:         n.cfg.Name,
		Region:         n.cfg.Region,
		AggregatorURL:  n.cfg.AggregatorURL,
		ShipToken:      n.operToken,
		TrustedProxies: n.cfg.TrustedProxies,
		CountryHeader:  n.cfg.CountryHeader,
		GeoIPPath:      n.cfg.GeoIPPath,
		Sites:          sites,
		Salts:          ingest.NewLocalSalts(time.Now),
		Logger:         n.log,
		Metrics:        n.metrics,
		Now:            time.Now,
	})
	return err
}

func (n *Node) openRaft() error {
	var err error
	n.raft, err = raft.Open(raft.Config{
		NodeID:       n.cfg.Name,
		Region:       n.cfg.Region,
		Dir:          filepath.Join(n.cfg.DataDir, "raft"),
		BindAddr:     n.cfg.RaftAddr,
		Bootstrap:    n.cfg.Dev,
		ApplyTimeout: n.cfg.ApplyTimeout,
		Logger:       n.log,
		Metrics:      n.metrics,
		OnChange: func(code string) {
			if srv := n.edge.Load(); srv != nil {
				srv.Invalidate(code)
			}
		},
		OnSite: n.sites.Put,
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
		ApplyTimeout:  n.cfg.ApplyTimeout,
		Ready:         n.ready,
		WriteMetrics:  n.writeMetrics,
		Routes: map[string]fasthttp.RequestHandler{
			"/s.js":      n.ingest.ScriptHandler(),
			"/api/event": n.ingest.EventHandler(),
		},
		OnRedirect: n.ingest.CaptureClick,
		Logger:     n.log,
		Metrics:    n.metrics,
		Now:        time.Now,
	}, n.store, n.raft)
	if err != nil {
		return err
	}
	n.edge.Store(srv)
	n.httpDone = make(chan error, 1)
	go func() { n.httpDone <- srv.Serve(n.httpLn) }()
	return nil
}

// ready is /readyz: Raft has a leader and the FSM has caught up.
func (n *Node) ready() (bool, string) { return n.raft.Ready() }

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
	if n.admin != nil {
		step("admin", func() error { return n.admin.Close(ctx) })
	}
	if srv := n.edge.Load(); srv != nil {
		step("edge", func() error { return srv.Shutdown(ctx) })
	} else if n.httpLn != nil {
		n.httpLn.Close()
	}
	if n.ingest != nil {
		step("ingest", func() error { return n.ingest.Close(ctx) })
	}
	if n.raft != nil {
		step("raft", n.raft.Close)
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
