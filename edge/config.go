package edge

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/store"
)

// Writer is the replicated write path; the node wires the raft package into
// it. Every method returns only after the change is committed and applied
// to the local store (or fails with store.ErrNoLeader or
// store.ErrUnknownOutcome).
type Writer interface {
	// CreateLink stores l. When idem is set and the owner already has a
	// live record under the same key, nothing is written and the record is
	// returned as existing.
	CreateLink(ctx context.Context, l *store.Link, idem *store.IdempotencyWrite) (index uint64, existing *store.Idempotency, err error)
	UpdateLink(ctx context.Context, p *store.LinkPatch) (store.Link, error)
	CreateSite(ctx context.Context, s *store.Site) (uint64, error)
	// UpdateSite applies a site edit (settings, one goal added or removed)
	// and returns the site as stored with the edit's log index.
	UpdateSite(ctx context.Context, p *store.SitePatch) (store.Site, uint64, error)
	NewCode(ctx context.Context) (string, error) // fresh generated 7-char code
	// CreateLinks stores a bulk create's items (codes chosen) in one log
	// entry or a few, one result per item in order (store.BulkResult).
	CreateLinks(ctx context.Context, items []store.BulkItem) ([]store.BulkResult, uint64, error)
}

// Config is what the node hands the edge server. Zero values take the
// defaults documented on each field.
type Config struct {
	PublicURL       string          // base of short_url, e.g. "http://127.0.0.1:8080"; its host:port is refused as a destination
	CacheEntries    int             // redirect cache size; 0 means 1<<20, negative disables the cache
	PrivateMaxAge   time.Duration   // Cache-Control for 302/307; default 60s
	PermanentMaxAge time.Duration   // Cache-Control for 301/308 (public); default 1 h, so a takedown reaches browsers that cached one
	BlockedHosts    []string        // deprecated (--blocked-hosts): refused at create and edit on this node only; the replicated blocklist is in the store
	OwnAddrs        []string        // listen addresses (host:port) of this node, refused as destinations like the public URL's host
	ClusterAddrs    func() []string // public and admin addresses (host:port) of the other nodes, refused too (a loop through another node); read at create and edit; may be nil
	WriteRate       float64         // per-API-key writes/s (token bucket, burst twice the rate); default 100, negative disables
	ApplyTimeout    time.Duration   // context deadline for writes; default 5s
	Ready           func() (bool, string)
	WriteMetrics    func(w io.Writer)                           // for /metrics; nil writes this server's Metrics set
	Routes          map[string]fasthttp.RequestHandler          // extra exact paths checked before the code route; may be nil
	APIFallback     fasthttp.RequestHandler                     // /v1/ paths edge does not serve (e.g. stats); nil answers 404
	Shares          ShareConfig                                 // issue 13: shared dashboards under /share/ (shares.go)
	OnRedirect      func(ctx *fasthttp.RequestCtx, code []byte) // after a 3xx (click capture), never for HEAD; must not block; may be nil

	// Redirect rules (rulematch.go). OnRuleRedirect replaces OnRedirect
	// for a link with rules: rule is the index + 1 of the rule followed,
	// 0 for the link's own URL. Classifier tells the rules a visitor's
	// device, OS, browser and country; nil, rules on those never match.
	OnRuleRedirect func(ctx *fasthttp.RequestCtx, code []byte, rule uint8)
	Classifier     VisitClassifier

	// EditReview is how long an edit that changes a destination shows the
	// review interstitial before redirecting (bait and switch); default
	// 24 h, negative disables.
	EditReview time.Duration

	// Read-your-writes across regions: a local miss on a code that
	// MaybeFresh says could have been created but not yet applied here asks
	// Remote (a voter) with RemoteTimeout, instead of answering 404 for a
	// code that exists. Both nil on a single node.
	Remote        func(ctx context.Context, code string) (store.Link, bool, error)
	MaybeFresh    func(code []byte) bool
	RemoteKey     func(ctx context.Context, h store.KeyHash) (store.Owner, store.APIKey, bool, error)
	RemoteTimeout time.Duration // default 300ms

	// MaxRequestBodyBytes caps a request body on every path that
	// BodyLimits does not name; /v1/ is capped at the API's own 16 KiB.
	// fasthttp refuses a larger body with 413 from its Content-Length
	// (or while reading a chunked one), before buffering it. Default
	// 64 KiB: the unauthenticated routes (events, redirects, pages) never
	// need more.
	MaxRequestBodyBytes int
	// BodyLimits raises (or lowers) the cap for exact paths, e.g. the
	// internal write forwarding and the aggregator's segment batches.
	BodyLimits map[string]int
	// MaxConns caps open public connections (default 16384) and
	// MaxConnsPerIP those from one client address (default 1024); past
	// them a new connection is answered 503 or 429 and closed.
	MaxConns      int
	MaxConnsPerIP int
	// WrapConn, if set, wraps every accepted connection above the
	// server's own deadline handling (the node serves mutual TLS to other
	// nodes on this port through it).
	WrapConn func(net.Conn) net.Conn
	// Reports bounds POST /v1/reports (reports.go).
	Reports ReportConfig
	Logger  *slog.Logger
	Metrics *metrics.Set
	Now     func() time.Time

	// Create limits (createlimits.go): POST /v1/links per client address,
	// per registrable domain of the destination and per API key, in
	// creates/s with a burst of createBurstSeconds of them; each defaults
	// as documented there, negative disables it.
	CreateRateIP, CreateRateDomain, CreateRateKey float64
	// TrustedProxies are the peers whose X-Forwarded-For names the client
	// for the per-address create limit; nil believes no one.
	TrustedProxies []netip.Prefix
	// SuspendedOwners is the node's set of suspended owners (their links
	// answer 410, their keys 401); nil is an empty set of the server's own.
	SuspendedOwners *OwnerSet
	// WebhookAllowPrivate lets webhooks name private, loopback and
	// link-local addresses (--webhook-allow-private; webhooks.go).
	WebhookAllowPrivate bool
}

const (
	defaultCacheEntries    = 1 << 20
	defaultPrivateMaxAge   = 60 * time.Second
	defaultPermanentMaxAge = time.Hour
	defaultEditReview      = 24 * time.Hour
	defaultWriteRate       = 100
	defaultApplyTimeout    = 5 * time.Second

	defaultMaxRequestBodyBytes = 64 << 10
)

func (c *Config) setDefaults() {
	if c.CacheEntries == 0 {
		c.CacheEntries = defaultCacheEntries
	}
	if c.PrivateMaxAge == 0 {
		c.PrivateMaxAge = defaultPrivateMaxAge
	}
	if c.PermanentMaxAge == 0 {
		c.PermanentMaxAge = defaultPermanentMaxAge
	}
	if c.EditReview == 0 {
		c.EditReview = defaultEditReview
	}
	if c.WriteRate == 0 {
		c.WriteRate = defaultWriteRate
	}
	if c.CreateRateIP == 0 {
		c.CreateRateIP = DefaultCreateRateIP
	}
	if c.CreateRateDomain == 0 {
		c.CreateRateDomain = DefaultCreateRateDomain
	}
	if c.CreateRateKey == 0 {
		c.CreateRateKey = DefaultCreateRateKey
	}
	if c.SuspendedOwners == nil {
		c.SuspendedOwners = NewOwnerSet()
	}
	if c.MaxRequestBodyBytes <= 0 {
		c.MaxRequestBodyBytes = defaultMaxRequestBodyBytes
	}
	if c.MaxConns <= 0 {
		c.MaxConns = defaultMaxConns
	}
	if c.MaxConnsPerIP <= 0 {
		c.MaxConnsPerIP = defaultMaxConnsPerIP
	}
	if c.RemoteTimeout <= 0 {
		c.RemoteTimeout = 300 * time.Millisecond
	}
	if c.ApplyTimeout <= 0 {
		c.ApplyTimeout = defaultApplyTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = metrics.NewSet()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}
