package edge

import (
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"
	"golang.org/x/net/publicsuffix"

	"github.com/waymark/waymark/store"
)

// Create limits: POST /v1/links takes a token from three buckets, each a
// token bucket of this node's own (limiter), refilled at its rate and
// holding createBurstSeconds of it:
//
//   - per client address, for every create request, before the API key
//     is even checked (IPv6 clients by their /64, the block one host
//     usually has; loopback clients not at all); behind
//     Config.TrustedProxies the address comes from X-Forwarded-For;
//   - per API key, once the key is known (a create the service then
//     fails, 5xx, gives the address's and the key's tokens back: retries
//     through an election must not lock a client out afterwards; its own
//     mistakes, 4xx, stay spent);
//   - per registrable domain of the destination (eTLD+1 from the public
//     suffix list: a.example.co.uk and b.example.co.uk share
//     example.co.uk; an IP literal is its own domain, IPv6 by /64), only
//     for a request that is otherwise a good create, and given back when
//     the create is then not made.
//
// The domain bucket is the one a stranger could try to drain to lock an
// innocent domain out. Bad requests never touch it (no key, a bad key, a
// bad body, a refused URL or alias, an address or key over its own
// limit, an idempotent replay), and a create that fails gives its token
// back, so only links actually made spend it. Making them needs an API
// key from the operator, goes at most at that key's and address's rates,
// and leaves a link per token, each with its owner, so the drain is
// visible and ends with `waymark owners suspend`. The domain rate
// defaults above the key rate, so one key alone cannot hold a domain at
// zero.
//
// The buckets are per node, not shared through the cluster: a client that
// spreads its requests over N nodes gets N times the budget. That keeps
// the limit off the Raft log and the network; the limits are there to
// stop floods, not to meter.
const (
	DefaultCreateRateIP     = 10 // creates/s per client address
	DefaultCreateRateKey    = 20 // creates/s per API key
	DefaultCreateRateDomain = 50 // creates/s per destination domain
	createBurstSeconds      = 10
)

type createLimits struct {
	ip      *limiter[clientKey]
	key     *limiter[store.KeyHash]
	domain  *limiter[string]
	trusted []netip.Prefix

	refusedIP, refusedKey, refusedDomain *metrics.Counter
}

func newCreateLimits(cfg Config) createLimits {
	refused := func(limit string) *metrics.Counter {
		return cfg.Metrics.GetOrCreateCounter(`waymark_api_create_rate_limited_total{limit="` + limit + `"}`)
	}
	return createLimits{
		ip:            newCreateLimiter[clientKey](cfg.CreateRateIP, cfg.Now),
		key:           newCreateLimiter[store.KeyHash](cfg.CreateRateKey, cfg.Now),
		domain:        newCreateLimiter[string](cfg.CreateRateDomain, cfg.Now),
		trusted:       cfg.TrustedProxies,
		refusedIP:     refused("ip"),
		refusedKey:    refused("key"),
		refusedDomain: refused("domain"),
	}
}

// newCreateLimiter is nil (no limit) for a rate that is not positive.
func newCreateLimiter[K comparable](rate float64, now func() time.Time) *limiter[K] {
	if rate <= 0 {
		return nil
	}
	return newLimiter[K](rate, max(1, rate*createBurstSeconds), now)
}

// createLinkLimited is POST /v1/links: the address limit, the API key, the
// write and create limits of the key, then the create itself (which takes
// the domain's token).
func (s *Server) createLinkLimited(ctx *fasthttp.RequestCtx) { s.createLimited(ctx, s.createLink) }

// createLimited runs create (one link, or a bulk call) under the address,
// write and key limits; a bulk call takes one token of each, its items
// one domain token each.
func (s *Server) createLimited(ctx *fasthttp.RequestCtx, create func(*fasthttp.RequestCtx, store.Owner)) {
	c := &s.creates
	client, byAddr := c.clientOf(ctx)
	byAddr = byAddr && c.ip != nil
	if byAddr {
		if ok, wait := c.ip.allow(client); !ok {
			refuseCreate(ctx, c.refusedIP, "too many new links from this address", wait)
			return
		}
	}
	owner, key, ok := s.authenticate(ctx)
	if !ok || !s.allowWrite(ctx, key) {
		return
	}
	if c.key != nil {
		if ok, wait := c.key.allow(key); !ok {
			refuseCreate(ctx, c.refusedKey, "too many new links with this API key", wait)
			return
		}
	}
	create(ctx, owner)
	// The service failing (no leader, full disk, an unknown outcome) is
	// not the client's doing: it gets its tokens back, so retries through
	// an election do not lock it out afterwards. Its own mistakes (4xx)
	// stay spent.
	if ctx.Response.StatusCode() >= 500 {
		if byAddr {
			c.ip.refund(client)
		}
		if c.key != nil {
			c.key.refund(key)
		}
	}
}

// takeCreateDomain takes the destination domain's token for a create that
// is about to be made, or answers 429. The caller gives it back with
// refundCreateDomain if the create is not made.
func (s *Server) takeCreateDomain(ctx *fasthttp.RequestCtx, host string) (string, bool) {
	c := &s.creates
	if c.domain == nil {
		return "", true
	}
	domain := registrableDomain(host)
	if ok, wait := c.domain.allow(domain); !ok {
		refuseCreate(ctx, c.refusedDomain, "too many new links to "+domain+" on this node", wait)
		return "", false
	}
	return domain, true
}

func (s *Server) refundCreateDomain(domain string) {
	if s.creates.domain != nil && domain != "" {
		s.creates.domain.refund(domain)
	}
}

// refuseCreate answers 429 rate-limited with Retry-After, the wait rounded
// up to whole seconds.
func refuseCreate(ctx *fasthttp.RequestCtx, counter *metrics.Counter, what string, wait time.Duration) {
	counter.Inc()
	secs := max(1, int((wait+time.Second-1)/time.Second))
	writeRetryProblem(ctx, probRateLimited, what+"; retry in "+strconv.Itoa(secs)+" s", secs)
}

// registrableDomain names the bucket of a destination host (lower-cased
// and IDNA-processed by parseDestination).
func registrableDomain(host string) string {
	h := strings.TrimSuffix(host, ".")
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")); err == nil {
		a = a.Unmap()
		if a.Is6() {
			p, _ := a.Prefix(64)
			return p.String()
		}
		return a.String()
	}
	if d, err := publicsuffix.EffectiveTLDPlusOne(h); err == nil {
		return d
	}
	return h // a public suffix itself, or a single label
}

// clientOf is the client address for the create limit: the peer, or
// behind a trusted proxy the right-most untrusted X-Forwarded-For entry;
// IPv6 addresses by their /64. A loopback client is not limited (false):
// it is a tool on the node's own host, or a local proxy whose clients
// --trusted-proxies tells apart (then each has its own bucket); without
// that, one bucket for all of them would throttle everyone together.
func (c *createLimits) clientOf(ctx *fasthttp.RequestCtx) (clientKey, bool) {
	peer, _ := netip.AddrFromSlice(ctx.RemoteIP())
	client := peer.Unmap()
	if c.isTrusted(client) {
		if xff := ctx.Request.Header.Peek("X-Forwarded-For"); len(xff) > 0 {
			client = c.fromXFF(string(xff), client)
		}
	}
	if client.IsLoopback() {
		return clientKey{}, false
	}
	if client.Is6() {
		p, _ := client.Prefix(64)
		client = p.Addr()
	}
	return clientKey(client.As16()), true
}

func (c *createLimits) isTrusted(a netip.Addr) bool {
	for _, p := range c.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// fromXFF walks X-Forwarded-For from the right past trusted proxies; the
// first untrusted address is the client (entries left of it are the
// client's own claims). A malformed entry ends the walk.
func (c *createLimits) fromXFF(xff string, peer netip.Addr) netip.Addr {
	client := peer
	for xff != "" {
		i := strings.LastIndexByte(xff, ',')
		part := strings.TrimSpace(xff[i+1:])
		xff = xff[:max(i, 0)]
		a, err := netip.ParseAddr(part)
		if err != nil {
			return client
		}
		client = a.Unmap()
		if !c.isTrusted(client) {
			return client
		}
	}
	return client
}
