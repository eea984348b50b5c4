package edge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/edge/problem"
	"github.com/waymark/waymark/store"
)

// Server is the public HTTP server of one node.
type Server struct {
	cfg        Config
	st         *store.Store
	w          Writer
	log        *slog.Logger
	now        func() time.Time
	onRedirect func(ctx *fasthttp.RequestCtx, code []byte)
	remote     func(ctx context.Context, code string) (store.Link, bool, error)
	maybeFresh func(code []byte) bool
	remoteWait time.Duration

	publicBase   string           // PublicURL without a trailing slash
	publicScheme string           // scheme of PublicURL, for short URLs on custom domains
	ownHost      string           // host of PublicURL, refused as a destination...
	ownOrigin    string           // ...on this host:port only, when PublicURL names a port
	blocked      *store.Blocklist // Config.BlockedHosts (deprecated, this node only)
	ownAddrs     map[netip.Addr]struct{}
	ownNames     map[string]struct{}
	reserved     map[string]struct{}
	routes       map[string]fasthttp.RequestHandler

	cache           *cache // nil when disabled
	privateMaxAge   int64  // seconds
	permanentMaxAge int64  // seconds

	auth    *authCache
	limiter *limiter[store.KeyHash]
	gate    *remoteGate
	limits  bodyLimits
	reports *reportDesk // POST /v1/reports
	m       *serverMetrics
	srv     *fasthttp.Server

	// Issue 11: create limits (createlimits.go) and the owners whose
	// links and keys are stopped (suspended.go).
	creates   createLimits
	suspended *OwnerSet

	// Issue 13: password attempts and hashing (password.go); redirect
	// rules (rulematch.go): the click hook that records the rule
	// followed, the visitor classifier, the counters.
	passwords      *passwordGate
	onRuleRedirect func(ctx *fasthttp.RequestCtx, code []byte, rule uint8)
	classifier     VisitClassifier
	ruleM          *ruleMetrics

	shares *shareDesk // issue 13: shared dashboards (shares.go, shareview.go)

	lnState listenerState

	lnMu      sync.Mutex
	listeners map[net.Listener]struct{}
	closed    bool
}

// New builds the server; it does not listen yet (see Serve).
func New(cfg Config, st *store.Store, w Writer) (*Server, error) {
	if st == nil || w == nil {
		return nil, errors.New("cannot create edge server: store and writer are required")
	}
	cfg.setDefaults()
	pub, err := parseDestination(cfg.PublicURL)
	if err != nil {
		return nil, fmt.Errorf("cannot create edge server: public URL %q: %w", cfg.PublicURL, err)
	}
	s := &Server{
		cfg:             cfg,
		st:              st,
		w:               w,
		log:             cfg.Logger.With("component", "edge"),
		now:             cfg.Now,
		onRedirect:      cfg.OnRedirect,
		remote:          cfg.Remote,
		maybeFresh:      cfg.MaybeFresh,
		remoteWait:      cfg.RemoteTimeout,
		publicBase:      strings.TrimRight(pub.url, "/"),
		publicScheme:    pub.scheme,
		ownHost:         strings.TrimSuffix(pub.host, "."),
		reserved:        make(map[string]struct{}),
		privateMaxAge:   int64(cfg.PrivateMaxAge / time.Second),
		permanentMaxAge: int64(cfg.PermanentMaxAge / time.Second),
		listeners:       make(map[net.Listener]struct{}),
	}
	var local []store.BlockEntry
	for _, h := range cfg.BlockedHosts {
		v, err := store.ParseBlockEntry(h)
		if err != nil {
			return nil, fmt.Errorf("cannot create edge server: blocked host: %w", err)
		}
		local = append(local, store.BlockEntry{Value: v, Kind: store.BlockKindBlock, Reason: "--blocked-hosts of this node"})
	}
	s.blocked = store.NewBlocklist(local, 0)
	s.ownAddrs, s.ownNames = ownAddrs(pub.canon, cfg.OwnAddrs)
	if pub.port != "" {
		// An explicit port (dev, tests) means other ports on the host are
		// other services; a public domain is refused on every port.
		s.ownOrigin = pub.hostPort()
	}
	for _, a := range reservedAliases {
		s.reserved[a] = struct{}{}
	}
	if cfg.CacheEntries > 0 {
		s.cache = newCache(cfg.CacheEntries, cfg.Metrics)
	}
	s.m = newServerMetrics(cfg.Metrics, s.cache)
	s.gate = newRemoteGate(cfg.Now, cfg.Metrics)
	s.auth = newAuthCache(st, cfg.Now)
	s.auth.remote, s.auth.remoteWait, s.auth.gate = cfg.RemoteKey, cfg.RemoteTimeout, s.gate
	if cfg.WriteRate > 0 {
		// At least one token: a rate under 0.5/s would otherwise hold
		// less than a whole write and refuse every one.
		s.limiter = newLimiter[store.KeyHash](cfg.WriteRate, max(1, 2*cfg.WriteRate), cfg.Now)
	}
	s.passwords = newPasswordGate(cfg.Now, cfg.Metrics, runtime.GOMAXPROCS(0))
	s.creates = newCreateLimits(cfg)
	s.suspended = cfg.SuspendedOwners
	s.onRuleRedirect, s.classifier, s.ruleM = cfg.OnRuleRedirect, cfg.Classifier, newRuleMetrics(cfg.Metrics)
	s.limits = newBodyLimits(cfg.MaxRequestBodyBytes, cfg.BodyLimits)
	if _, set := s.limits.exact[bulkPath]; !set {
		s.limits.exact[bulkPath] = maxBulkBodyBytes // bulk.go
	}
	s.reports = newReportDesk(s, w)
	s.shares = newShareDesk(cfg.Now, cfg.Metrics)
	openAPI, err := newOpenAPIRoute()
	if err != nil {
		return nil, fmt.Errorf("cannot create edge server: %w", err)
	}
	s.routes = map[string]fasthttp.RequestHandler{
		"/healthz":  s.serveHealth,
		"/readyz":   s.serveReady,
		"/metrics":  s.serveMetrics,
		openAPIPath: openAPI,
	}
	for path, h := range cfg.Routes {
		if !strings.HasPrefix(path, "/") || h == nil {
			return nil, fmt.Errorf("cannot create edge server: route %q must start with / and have a handler", path)
		}
		if _, dup := s.routes[path]; dup || strings.HasPrefix(path, "/v1/") || strings.HasPrefix(path, "/problems/") {
			return nil, fmt.Errorf("cannot create edge server: route %q clashes with a built-in route", path)
		}
		if hasScopeRow(path) { // the stats query API: key and scope checked here
			h = s.requireScope(h)
		}
		s.routes[path] = h
		// A route's first segment can never be an alias.
		first, _, _ := strings.Cut(path[1:], "/")
		if first != "" {
			s.reserved[strings.ToLower(first)] = struct{}{}
		}
	}
	s.srv = &fasthttp.Server{
		Handler:                      s.handle,
		ErrorHandler:                 s.handleParseError,
		Logger:                       fasthttpLogger{s.log},
		ReadBufferSize:               readBufferSize, // also the limit on the request line and headers
		ReadTimeout:                  10 * time.Second,
		WriteTimeout:                 10 * time.Second,
		IdleTimeout:                  90 * time.Second,
		HeaderReceived:               s.headerReceived,   // the body limit of each route...
		MaxRequestBodySize:           s.limits.largest(), // ...within this
		DisablePreParseMultipartForm: true,
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		LazyRequestTime:              true,
		// The listener caps connections (with problem answers); fasthttp's
		// own cap sits just above it so its plain-text refusal never fires.
		Concurrency:     cfg.MaxConns + 64,
		CloseOnShutdown: true,
		TCPKeepalive:    true,
	}
	return s, nil
}

// Handler returns the whole public router.
func (s *Server) Handler() fasthttp.RequestHandler { return s.handle }

// Serve accepts connections on ln until Shutdown, then returns nil.
func (s *Server) Serve(ln net.Listener) error {
	s.lnMu.Lock()
	if s.closed {
		s.lnMu.Unlock()
		ln.Close()
		return nil
	}
	s.listeners[ln] = struct{}{}
	s.lnMu.Unlock()
	defer func() {
		s.lnMu.Lock()
		delete(s.listeners, ln)
		s.lnMu.Unlock()
	}()
	guarded := newGuardedListener(ln, &s.lnState, s.cfg.MaxConns, s.cfg.MaxConnsPerIP, s.cfg.Metrics, func(msg string, args ...any) {
		s.log.Warn(msg, append(args, "addr", ln.Addr().String())...)
	})
	if err := s.srv.Serve(deadlineListener{guarded, s.cfg.WrapConn}); err != nil {
		err = fmt.Errorf("cannot serve public HTTP on %s: %w", ln.Addr(), err)
		s.lnState.dead.Store(&err)
		return err
	}
	return nil
}

// Shutdown stops accepting, closes idle connections and waits for open
// requests until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.lnMu.Lock()
	s.closed = true
	s.lnMu.Unlock()
	err := s.srv.ShutdownWithContext(ctx)
	s.reports.close()
	// fasthttp only closes listeners its Serve has registered; a Serve that
	// started just before Shutdown may not have, so close them here too (a
	// second Close of the same listener is harmless).
	s.lnMu.Lock()
	for ln := range s.listeners {
		ln.Close()
	}
	s.lnMu.Unlock()
	if err != nil {
		return fmt.Errorf("cannot shut down public HTTP: %w", err)
	}
	return nil
}

// Invalidate drops the cached answer for code, positive or negative. The FSM
// calls it for every code it changes, after the change is committed to
// Pebble and before the apply returns, so the very next request reads the
// new state.
func (s *Server) Invalidate(code string) {
	if s.cache != nil {
		s.cache.invalidate(code)
	}
	s.gate.linkMiss.forget(code)
}

// BeginChange fences code off in the cache while a change to it commits:
// its entry goes and no lookup is cached until EndChange.
func (s *Server) BeginChange(code string) {
	if s.cache != nil {
		s.cache.beginChange(code)
	}
}

// EndChange ends BeginChange's fence and drops code's entry, like
// Invalidate.
func (s *Server) EndChange(code string) {
	if s.cache != nil {
		s.cache.endChange(code)
	}
	s.gate.linkMiss.forget(code)
}

// InvalidateAll drops every cached answer. The node calls it after a
// snapshot restore replaces the store underneath the cache.
func (s *Server) InvalidateAll() {
	if s.cache != nil {
		s.cache.invalidateAll()
	}
	s.auth.reset()
}

// readBufferSize is fasthttp's default, named because it is also the most
// a request line and headers may take (431 past it).
const readBufferSize = 4096

var (
	prefixAPI      = []byte("/v1/")
	prefixProblems = []byte("/problems/")
	prefixShare    = []byte(sharePrefix)
)

// handle routes a request: exact routes, then the API, then the code route.
func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	path := ctx.Path()
	if h, ok := s.routes[string(path)]; ok {
		h(ctx)
		return
	}
	switch {
	case bytes.HasPrefix(path, prefixAPI):
		s.serveAPI(ctx)
	case bytes.HasPrefix(path, prefixProblems):
		serveProblemDoc(ctx)
	case len(path) > 1 && validCodeSyntax(path[1:]):
		s.serveHostCode(ctx, path[1:]) // domains.go: Host routing, then serveCode
	case bytes.HasPrefix(path, prefixShare):
		s.serveShare(ctx) // shareview.go
	default:
		if !ctx.IsGet() && !ctx.IsHead() {
			ctx.Response.Header.Set("Allow", "GET, HEAD")
			writePage(ctx, fasthttp.StatusMethodNotAllowed, pageMethod)
			return
		}
		// Not a possible code: answer without a lookup or a cache entry.
		s.m.notFound.Inc()
		writePage(ctx, fasthttp.StatusNotFound, pageNotFound)
	}
}

// handleParseError answers requests fasthttp could not read, as RFC 9457
// problems like every other API error. The default would answer plain
// text and call an oversized body a 400.
func (s *Server) handleParseError(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var netErr net.Error
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		s.m.bodyTooLarge.Inc()
		writeProblem(ctx, probTooLarge, s.tooLargeDetail(ctx))
	case errors.As(err, &small):
		writeProblem(ctx, problem.HeaderTooLarge, "request line or headers are larger than "+strconv.Itoa(readBufferSize)+" bytes")
	case errors.As(err, &netErr) && netErr.Timeout():
		writeProblem(ctx, problem.RequestTimeout, "the request was not received in time")
	default:
		writeProblem(ctx, probInvalidRequest, "malformed HTTP request")
	}
}

func (s *Server) serveHealth(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetBodyString("ok\n")
}

func (s *Server) serveReady(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	if s.cfg.Ready != nil {
		if ok, detail := s.cfg.Ready(); !ok {
			ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
			ctx.SetBodyString("not ready: " + detail + "\n")
			return
		}
	}
	ctx.SetBodyString("ready\n")
}

func (s *Server) serveMetrics(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("text/plain; version=0.0.4; charset=utf-8")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	if s.cfg.WriteMetrics != nil {
		s.cfg.WriteMetrics(ctx)
		return
	}
	s.cfg.Metrics.WritePrometheus(ctx)
}

// fasthttpLogger sends fasthttp's own messages (bad requests, timeouts) to
// slog.
type fasthttpLogger struct{ l *slog.Logger }

func (f fasthttpLogger) Printf(format string, args ...any) {
	f.l.Warn(fmt.Sprintf(format, args...), "source", "fasthttp")
}

// The server's read, write and idle timeouts make fasthttp set a socket
// deadline three times per request. Each of those moves a runtime timer,
// which on the redirect path costs about as much as the cache lookup. A
// deadlineConn keeps the deadline fasthttp asks for in an atomic and
// touches the socket only to bring its deadline earlier; a socket deadline
// that fires before the wanted one is pushed out and the Read or Write
// carries on. Timeouts fire exactly when they did, at almost no cost per
// request on a busy connection.

// deadlineListener hands out deadlineConns.
type deadlineListener struct {
	net.Listener
	wrap func(net.Conn) net.Conn // Config.WrapConn
}

func (l deadlineListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if l.wrap != nil {
		return l.wrap(&deadlineConn{Conn: c}), nil
	}
	return &deadlineConn{Conn: c}, nil
}

// deadlineConn is a net.Conn with cheap deadlines (see above).
type deadlineConn struct {
	net.Conn
	read, write lazyDeadline
}

func (c *deadlineConn) Read(b []byte) (int, error) {
	for {
		n, err := c.Conn.Read(b)
		if n > 0 || err == nil || !errors.Is(err, os.ErrDeadlineExceeded) || !c.read.firedEarly(c.Conn.SetReadDeadline) {
			return n, err
		}
	}
}

func (c *deadlineConn) Write(b []byte) (int, error) {
	done := 0
	for {
		n, err := c.Conn.Write(b[done:])
		done += n
		if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) || !c.write.firedEarly(c.Conn.SetWriteDeadline) {
			return done, err
		}
	}
}

func (c *deadlineConn) SetDeadline(t time.Time) error {
	return errors.Join(c.SetReadDeadline(t), c.SetWriteDeadline(t))
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	return c.read.set(t, c.Conn.SetReadDeadline)
}

func (c *deadlineConn) SetWriteDeadline(t time.Time) error {
	return c.write.set(t, c.Conn.SetWriteDeadline)
}

// SetKeepAlive and SetKeepAlivePeriod keep fasthttp's TCPKeepalive
// working through the wrapper.
func (c *deadlineConn) SetKeepAlive(on bool) error {
	if k, ok := c.Conn.(interface{ SetKeepAlive(bool) error }); ok {
		return k.SetKeepAlive(on)
	}
	return nil
}

func (c *deadlineConn) SetKeepAlivePeriod(d time.Duration) error {
	if k, ok := c.Conn.(interface{ SetKeepAlivePeriod(time.Duration) error }); ok {
		return k.SetKeepAlivePeriod(d)
	}
	return nil
}

// lazyDeadline is one direction's deadline: want is what the server asked
// for, armed what the socket has (Unix ns, 0 meaning none). The socket's
// deadline is never later than want.
type lazyDeadline struct {
	want  atomic.Int64
	armed atomic.Int64 // written only under mu
	mu    sync.Mutex
}

func unixNanoOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// earlierOrSame reports whether deadline a (Unix ns, 0 meaning none) comes
// no later than b.
func earlierOrSame(a, b int64) bool { return b == 0 || (a != 0 && a <= b) }

// set records t; it arms the socket only when t is earlier than what the
// socket has.
func (d *lazyDeadline) set(t time.Time, arm func(time.Time) error) error {
	ns := unixNanoOrZero(t)
	d.want.Store(ns)
	if !earlierOrSame(d.armed.Load(), ns) {
		return d.arm(arm, false)
	}
	return nil
}

// arm gives the socket the wanted deadline (again, with force, when the
// socket's has expired). A set that raced with it and saw the old armed
// value is caught by the check after the store: both sides store, then
// load, so one of them sees the other.
func (d *lazyDeadline) arm(arm func(time.Time) error, force bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		ns := d.want.Load()
		if force || ns != d.armed.Load() {
			var t time.Time
			if ns != 0 {
				t = time.Unix(0, ns)
			}
			if err := arm(t); err != nil {
				return err
			}
			d.armed.Store(ns)
			force = false
		}
		if earlierOrSame(ns, d.want.Load()) {
			return nil
		}
	}
}

// firedEarly is called after the socket's deadline expired. It reports
// whether the wanted deadline is still ahead (or gone), in which case it
// moves the socket's deadline there and the operation is retried;
// otherwise the timeout is real.
func (d *lazyDeadline) firedEarly(arm func(time.Time) error) bool {
	if w := d.want.Load(); w != 0 && w <= time.Now().UnixNano() {
		return false
	}
	return d.arm(arm, true) == nil
}
