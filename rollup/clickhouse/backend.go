package clickhouse

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/waymark/waymark/rollup/query"
)

// Defaults of BackendConfig.
const (
	DefaultRetention     = 90 * 24 * time.Hour
	DefaultHourRetention = 30 * 24 * time.Hour
	DefaultMaxEvents     = 5_000_000
	defaultQueryTimeout  = 60 * time.Second
)

// BackendConfig configures a Backend.
type BackendConfig struct {
	// Retention: raw days whose every event is older are dropped
	// (ApplyRetention). Zero means DefaultRetention (the embedded store's).
	Retention time.Duration
	// HourRetention is how far back the heatmap reads, as the embedded
	// store's hour tier. Zero means DefaultHourRetention.
	HourRetention time.Duration
	// MaxEvents bounds the raw events one site question may read. Zero
	// means DefaultMaxEvents.
	MaxEvents int
	// QueryTimeout bounds each question. Zero means 60 s.
	QueryTimeout time.Duration
	// Lateness is how long past an hour's end and the visit gap its site
	// rows wait for late segments before they are materialized
	// (MaterializeOnce). Zero means DefaultLateness.
	Lateness time.Duration
	// NoRows answers every site and link question from the raw events,
	// never from materialized rows (comparisons, debugging).
	NoRows bool
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
	// LinkRowCacheBytes bounds the cache of decoded link rows of clean
	// hours (linkcache.go). Zero means DefaultLinkRowCacheBytes.
	LinkRowCacheBytes int
	// MarkSettle: a site, or the link hours, whose newest dirty mark is
	// younger waits for a later pass (settle.go). Zero: no wait.
	MarkSettle time.Duration
	// SiteRowCacheBytes bounds the cache of decoded site rows of clean
	// units and days (sitecache.go). Zero means DefaultSiteRowCacheBytes.
	SiteRowCacheBytes int
}

// Backend answers every question of query.Backend from ClickHouse, and
// stores shipped segments there (StoreSegment). Safe for concurrent use.
type Backend struct {
	c   *Client
	cfg BackendConfig

	links *linkRowCache
	sites *siteRowCache
	// filling holds the (site, dim) whose stored day rows a background
	// read is putting into the cache (fillDays): one at a time each.
	filling sync.Map

	// versionMargin is versionMargin but in tests; afterRun, if set, is
	// called after each site run (a test's way into a pass).
	versionMargin time.Duration
	afterRun      func(site string, u0, u1 int64)

	mu     sync.RWMutex
	closed bool
}

var _ query.Backend = (*Backend)(nil)

// NewBackend returns a Backend over c, whose schema the caller has
// migrated (Client.Migrate).
func NewBackend(c *Client, cfg BackendConfig) *Backend {
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.HourRetention <= 0 {
		cfg.HourRetention = DefaultHourRetention
	}
	if cfg.MaxEvents <= 0 {
		cfg.MaxEvents = DefaultMaxEvents
	}
	if cfg.QueryTimeout <= 0 {
		cfg.QueryTimeout = defaultQueryTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Lateness <= 0 {
		cfg.Lateness = DefaultLateness
	}
	if cfg.LinkRowCacheBytes <= 0 {
		cfg.LinkRowCacheBytes = DefaultLinkRowCacheBytes
	}
	if cfg.SiteRowCacheBytes <= 0 {
		cfg.SiteRowCacheBytes = DefaultSiteRowCacheBytes
	}
	return &Backend{c: c, cfg: cfg, links: newLinkRowCache(cfg.LinkRowCacheBytes, c.m.linkCache),
		sites: newSiteRowCache(cfg.SiteRowCacheBytes, c.m.siteCache), versionMargin: versionMargin}
}

// Client is the backend's ClickHouse client.
func (b *Backend) Client() *Client { return b.c }

// StoreSegment stores one sealed segment exactly once: its events, its
// drop tallies and its identity (Client.StoreSegment). Visits need no
// state here: they are rebuilt from the events when asked (DESIGN.md,
// "Visits"), so a visit across segments, aggregators or restarts is one
// visit.
func (b *Backend) StoreSegment(ctx context.Context, raw []byte) (StoreResult, error) {
	if err := b.enter(); err != nil {
		return StoreResult{}, err
	}
	defer b.leave()
	// Events older than half the lateness may fall into hours whose rows
	// are materialized (an aggregator's clock may be behind this one's):
	// their units are marked dirty before the identity is recorded.
	before := b.cfg.Now().Add(-b.cfg.Lateness / 2).UnixMilli()
	return b.c.storeSegmentMarking(ctx, raw, &lateMarker{before: before, mark: b.markLate})
}

// StoreSegments stores a shipped batch's segments (storebatch.go): one
// identity lookup, one events insert and one identity insert for all the
// segments not stored before; out[i] and errs[i] are StoreSegment's
// answers for raws[i].
func (b *Backend) StoreSegments(ctx context.Context, raws [][]byte) ([]StoreResult, []error) {
	if err := b.enter(); err != nil {
		errs := make([]error, len(raws))
		for i := range errs {
			errs[i] = err
		}
		return make([]StoreResult, len(raws)), errs
	}
	defer b.leave()
	before := b.cfg.Now().Add(-b.cfg.Lateness / 2).UnixMilli()
	return b.c.storeBatch(ctx, raws, &lateMarker{before: before, mark: b.markLate})
}

// Close makes every later call fail with query.ErrClosed; it does not
// close the client.
func (b *Backend) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

func (b *Backend) enter() error {
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return query.ErrClosed
	}
	return nil
}

func (b *Backend) leave() { b.mu.RUnlock() }

// ctx is a question's context.
func (b *Backend) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), b.cfg.QueryTimeout)
}

// Hours: rollups are hourly in the embedded store, so a range is read at
// whole UTC hours (query.Range), From rounded down and To up.
const msPerHour = int64(time.Hour / time.Millisecond)

func floorHour(t time.Time) int64 { return floorDiv(t.UnixMilli(), msPerHour) * msPerHour }

func ceilHour(t time.Time) int64 {
	ms := t.UnixMilli()
	h := floorDiv(ms, msPerHour) * msPerHour
	if h < ms {
		h += msPerHour
	}
	return h
}

// hourBounds is r at whole UTC hours, in ms.
func hourBounds(r query.Range) (int64, int64) { return floorHour(r.From), ceilHour(r.To) }

// secs is a [lo, hi) ms range as a condition on the events' time (whole
// seconds) and ms columns; lo and hi are whole hours, so seconds suffice.
func timeIn(lo, hi int64) string {
	return fmt.Sprintf("time >= toDateTime(%d) AND time < toDateTime(%d)", floorDiv(lo, 1000), floorDiv(hi+999, 1000))
}

func round2(v float64) float64 { return math.RoundToEven(v*100) / 100 }

func round4(v float64) float64 { return float64(int64(v*10000+0.5)) / 10000 }

func ratio(num, den int64) float64 {
	if den == 0 {
		return 0
	}
	return float64(num) / float64(den)
}
