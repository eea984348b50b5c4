package ingest

import (
	"net/netip"
	"sync"

	"github.com/valyala/fasthttp"
)

// VisitClassifier answers the edge's redirect rules with analytics' own
// answers, so a rule on "mobile" or "DE" agrees with the stats: the same
// user-agent parser (behind a cache of its own) and the same country (the
// trusted proxy's header, else the GeoIP database, for the same client
// address). It is built on first use: a node whose links have no rules
// never opens a second view of the GeoIP database.
//
// Safe for concurrent use. One mutex guards the cache and the database
// view (both single-goroutine structures); a hit holds it for a cache
// probe, a miss of the user-agent cache for a parse (microseconds).
type VisitClassifier struct {
	p *Pipeline

	mu     sync.Mutex
	e      *enricher // nil until first use
	failed bool      // the GeoIP database could not be opened again: user agents only
	closed bool      // the pipeline closed: no database is opened again
}

// uaRuleCacheSets sizes the classifier's user-agent cache: 2,048 sets of
// 8, 16,384 user agents in 128 KiB; only visitors of links with rules go
// through it.
const uaRuleCacheSets = 1 << 11

// Classifier returns the pipeline's visit classifier for redirect rules.
func (p *Pipeline) Classifier() *VisitClassifier {
	p.classifierOnce.Do(func() { p.classifier = &VisitClassifier{p: p} })
	return p.classifier
}

// enricher returns the classifier's own enricher, built on first use.
// Called with mu held.
func (c *VisitClassifier) enricher() *enricher {
	if c.e != nil {
		return c.e
	}
	path := c.p.cfg.GeoIPPath
	if c.closed {
		path = ""
	}
	e, err := newEnricher(path)
	if err != nil {
		c.p.log.Error("cannot open the GeoIP database for redirect rules; country rules will not match", "path", path, "err", err)
		c.failed = true
		e, _ = newEnricher("")
	}
	e.cache = newUACache(uaRuleCacheSets)
	c.e = e
	return e
}

// Classify describes the visitor of a redirect request: with ua, the
// device class ("desktop", "mobile", "tablet", "tv" or ""), OS and
// browser as analytics records them; with geo, the country (ISO 3166-1
// alpha-2, zero when unknown). It allocates nothing once the user agent
// and the place are known.
func (c *VisitClassifier) Classify(ctx *fasthttp.RequestCtx, ua, geo bool) (device, os, browser string, country [2]byte) {
	if !ua && !geo {
		return "", "", "", country
	}
	var addr netip.Addr
	if geo {
		addr, country = c.p.clientOf(ctx) // the proxy's country wins, as in finish
		if country != ([2]byte{}) && !ua {
			return "", "", "", country
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.enricher()
	if geo && country == ([2]byte{}) {
		if s := e.locate(addr).country; len(s) == 2 {
			country = [2]byte{s[0], s[1]}
		}
	}
	if ua {
		info := e.userAgent(uaOf(ctx))
		device, os, browser = info.device, info.os, info.browser
	}
	return device, os, browser, country
}

func uaOf(ctx *fasthttp.RequestCtx) []byte {
	ua := ctx.Request.Header.UserAgent()
	return ua[:min(len(ua), maxUALen)]
}

// close releases the classifier's view of the GeoIP database. Called by
// Pipeline.Close after the HTTP servers stopped; a late call finds none.
func (c *VisitClassifier) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.e != nil {
		c.e.close()
		c.e = nil
	}
}
