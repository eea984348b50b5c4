package ingest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// Config configures a Pipeline. Zero values take the defaults noted.
type Config struct {
	Dir             string        // segment folder (DATA_DIR/segments)
	NodeID, Region  string        // NodeID must stay with Dir: (NodeID, seq) names a segment forever
	SegmentMaxBytes int64         // rotate by size (default 8 MiB)
	SegmentMaxAge   time.Duration // rotate by age (default 2s; bounds aggregator freshness)
	SyncInterval    time.Duration // group fsync interval (default 200ms) = loss window on a crash
	MaxPendingBytes int64         // byte cap on unshipped data (default 1 GiB); past it new events are dropped and counted
	QueueSize       int           // bounded in-memory event queue (default 65536, rounded up to a power of two); full -> drop + count, never block

	AggregatorURL string // shipper POSTs batches to AggregatorURL+ShipPath; empty: segments accumulate
	// Aggregators, when set, is asked before every shipping round for the
	// aggregators to ship to (gossip or a URL list); it overrides
	// AggregatorURL unless it returns none. With one, segments ship whole
	// as with AggregatorURL; with more, each is split by partition and
	// each part ships to its owner (shipsplit.go, DESIGN.md).
	Aggregators func() []Aggregator
	ShipToken   string // sent as "Authorization: Bearer ..." to the aggregator
	// ShipBatchMaxBytes bounds the raw segment bytes in one POST (default
	// 4 MiB); a single larger segment still goes alone.
	ShipBatchMaxBytes int64
	ShipMaxBackoff    time.Duration // retry backoff ceiling (default 30s)
	// DeferShipWhileBusy, for a node that aggregates its own events on
	// the CPUs that serve them: the longest the shipper holds sealed
	// segments back while the process is busy serving (shippace.go).
	// Zero ships at once.
	DeferShipWhileBusy time.Duration
	HTTPClient         *http.Client // default: a client with a 30s timeout

	TrustedProxies []netip.Prefix // X-Forwarded-For / CountryHeader honoured only from these
	CountryHeader  string         // e.g. "CF-IPCountry"
	GeoIPPath      string         // optional MaxMind-format country or city database (geoip.go)

	// Rate limits of /api/event, in events per second with a burst. Zero
	// takes the default (site: 1000/s, burst 2000; IP: 100/s, burst 1000).
	// Load tests from one address need a higher IP limit.
	SiteRate, SiteBurst float64
	IPRate, IPBurst     float64
	// MaxBodyBytes bounds an /api/event body (default 64 KiB); larger is 413.
	MaxBodyBytes int

	Sites   *Sites     // in-memory site table, kept current by the node
	Salts   SaltSource // daily salt; default LocalSalts
	Logger  *slog.Logger
	Metrics *metrics.Set
	Now     func() time.Time
}

func (c *Config) setDefaults() {
	if c.SegmentMaxBytes <= 0 {
		c.SegmentMaxBytes = 8 << 20
	}
	if c.SegmentMaxAge <= 0 {
		c.SegmentMaxAge = 2 * time.Second
	}
	if c.SyncInterval <= 0 {
		c.SyncInterval = 200 * time.Millisecond
	}
	if c.MaxPendingBytes <= 0 {
		c.MaxPendingBytes = 1 << 30
	}
	if c.QueueSize <= 0 {
		c.QueueSize = 65536
	}
	if c.ShipBatchMaxBytes <= 0 {
		c.ShipBatchMaxBytes = 4 << 20
	}
	if c.ShipMaxBackoff <= 0 {
		c.ShipMaxBackoff = 30 * time.Second
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if c.SiteRate <= 0 {
		c.SiteRate = 1000
	}
	if c.SiteBurst <= 0 {
		c.SiteBurst = 2000
	}
	if c.IPRate <= 0 {
		c.IPRate = 100
	}
	if c.IPBurst <= 0 {
		c.IPBurst = 1000
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 64 << 10
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Metrics == nil {
		c.Metrics = metrics.NewSet()
	}
	if c.Sites == nil {
		c.Sites = NewSites()
	}
	if c.Salts == nil {
		c.Salts = NewLocalSalts(c.Now)
	}
}

// Pipeline captures events, writes them to segment files and ships sealed
// segments. It is safe for concurrent use.
type Pipeline struct {
	cfg   Config
	log   *slog.Logger
	now   func() time.Time
	m     *pipelineMetrics
	queue *eventQueue
	pool  sync.Pool
	// tallies counts the events dropped before they were written, until
	// the writer records them in a segment (droptally.go).
	tallies   *dropTallies
	talliedAt time.Time // when the writer last recorded them

	closed     atomic.Bool
	stopWriter chan struct{}
	writerDone chan struct{}

	// Used only by the writer goroutine.
	seg    *segmentWriter
	enrich *enricher
	rng    *mrand.ChaCha8
	// idSeq orders the event ids this writer mints (see Event.ID): it
	// starts at the writer's start in microseconds and counts events.
	idSeq  uint64
	hashIn []byte
	salt   daySalt // the salt of the last event's day, fetched once per batch
	// prevSalt is the salt of the day before it, for events just after
	// midnight UTC (see finish).
	prevSalt daySalt
	lastUA   []byte // the previous event's user agent and what it told
	lastUI   uaInfo
	touched  uint64 // sum of the cache words prepare read

	pendingBytes   atomic.Int64
	oldestSealedMs atomic.Int64 // created time of the oldest sealed segment, 0 if none
	openCreatedMs  atomic.Int64 // created time of the open segment, 0 if none
	sealingMs      atomic.Int64 // created time of the oldest segment being sealed, 0 if none

	countryKey []byte // CountryHeader in fasthttp's canonical form; nil: use Peek

	limits  *rateLimits
	ship    *shipper
	script  scriptAsset
	closeMu sync.Mutex

	// Redirect rules' view of the visitor (classify.go), made on first use.
	classifierOnce sync.Once
	classifier     *VisitClassifier
}

// Open recovers the segment folder (cutting any torn tail), then starts the
// writer and shipper goroutines.
func Open(cfg Config) (*Pipeline, error) {
	p, err := newPipeline(cfg)
	if err != nil {
		return nil, err
	}
	p.start()
	p.log.Info("ingest pipeline open", "dir", p.cfg.Dir, "node", p.cfg.NodeID,
		"pending_bytes", p.pendingBytes.Load(), "next_seq", p.seg.nextSeq)
	return p, nil
}

// newPipeline builds a pipeline and recovers its folder without starting
// any goroutine (benchmarks drive the writer directly).
func newPipeline(cfg Config) (*Pipeline, error) {
	if cfg.Dir == "" || cfg.NodeID == "" {
		return nil, errors.New("cannot open ingest pipeline: Dir and NodeID are required")
	}
	if len(cfg.NodeID) > MaxShortLen || len(cfg.Region) > MaxShortLen {
		return nil, errors.New("cannot open ingest pipeline: NodeID and Region must be at most 64 bytes (the aggregator refuses longer)")
	}
	cfg.setDefaults()
	p := &Pipeline{
		cfg:        cfg,
		log:        cfg.Logger.With("component", "ingest"),
		now:        cfg.Now,
		queue:      newEventQueue(cfg.QueueSize),
		tallies:    newDropTallies(),
		stopWriter: make(chan struct{}),
		writerDone: make(chan struct{}),
		script:     newScriptAsset(),
	}
	p.pool.New = func() any { return new(pending) }
	p.m = newPipelineMetrics(cfg.Metrics, p)
	var seed [32]byte
	_, _ = rand.Read(seed[:])
	p.rng = mrand.NewChaCha8(seed)
	p.idSeq = uint64(time.Now().UnixMicro())
	p.forgetSalts()
	if cfg.CountryHeader != "" {
		p.countryKey = canonicalHeaderKey(cfg.CountryHeader)
	}
	p.limits = newRateLimits(cfg.SiteRate, cfg.SiteBurst, cfg.IPRate, cfg.IPBurst)

	enrich, err := newEnricher(cfg.GeoIPPath)
	if err != nil {
		return nil, err
	}
	p.enrich = enrich
	p.seg = &segmentWriter{
		dir: cfg.Dir, nodeID: cfg.NodeID,
		maxBytes: cfg.SegmentMaxBytes, maxAge: cfg.SegmentMaxAge, capBytes: cfg.MaxPendingBytes,
		now: cfg.Now, log: p.log, pending: &p.pendingBytes, sealing: &p.sealingMs,
	}
	if err := p.seg.recoverDir(); err != nil {
		enrich.close()
		return nil, fmt.Errorf("cannot open ingest pipeline: %w", err)
	}
	p.ship = newShipper(p)
	p.seg.onSeal = func(seq uint64, records int, whole bool, created time.Time) {
		if whole {
			p.ship.writtenHere(seq)
		}
		p.noteSealed(created)
		p.ship.wake()
	}
	p.seg.syncer = &segmentSyncer{
		dir: cfg.Dir, interval: cfg.SyncInterval, log: p.log, pending: &p.pendingBytes, sealing: &p.sealingMs,
		onSeal: p.seg.onSeal, errors: cfg.Metrics.GetOrCreateCounter("waymark_ingest_sync_errors_total"),
	}
	return p, nil
}

// start starts the syncer, the writer and the shipper.
func (p *Pipeline) start() {
	p.seg.syncer.start()
	go p.runWriter()
	p.ship.start()
}

// enqueue hands a filled pending event to the writer, or drops it.
func (p *Pipeline) enqueue(pe *pending) bool {
	if p.queue.push(pe) {
		return true
	}
	p.m.drop(DropQueueFull)
	p.tallyPending(pe, 1)
	p.release(pe)
	return false
}

// tallyPending counts n dropped events of what pe captured: a click's
// code, or a site event's site.
func (p *Pipeline) tallyPending(pe *pending, n uint64) {
	if pe.click {
		p.tallies.add(ScopeLink, pe.viewString(pe.spans[spanCode]), pe.clickAt, n)
		return
	}
	p.tallyEvent(&pe.ev, n)
}

// tallyEvent counts n dropped events like ev.
func (p *Pipeline) tallyEvent(ev *Event, n uint64) {
	scope, name := ScopeSite, ev.SiteID
	if ev.Kind == KindClick {
		scope, name = ScopeLink, ev.Code
	}
	p.tallies.add(scope, name, ev.Time, n)
}

func (p *Pipeline) release(pe *pending) {
	pe.reset()
	p.pool.Put(pe)
}

// flushInterval is how long the writer lets events collect in the queue
// between two batches while they keep coming. Waking per event costs a
// goroutine switch and a write(2) each; one batch per interval hands the
// kernel one write for hundreds of events, and redirects never wake the
// writer while it waits. It bounds what a process crash can lose beyond
// the queue itself (see DESIGN.md, loss window).
const flushInterval = 2 * time.Millisecond

// runWriter is the only goroutine that touches segment files. Idle, it
// parks on the queue, so the first event is written at once; while events
// keep arriving it drains the queue in batches every flushInterval.
func (p *Pipeline) runWriter() {
	defer close(p.writerDone)
	tick := time.NewTicker(min(p.cfg.SyncInterval, p.cfg.SegmentMaxAge))
	defer tick.Stop()
	batch := time.NewTimer(flushInterval)
	batch.Stop()
	var linger time.Duration // 0: idle, parked on the queue
	for {
		wake, due := (<-chan struct{})(nil), (<-chan time.Time)(nil)
		switch {
		case linger > 0:
			due = batch.C
		case p.queue.park():
			wake = p.queue.wake
		default: // events came while the writer was busy: a batch now
			p.writeBatch()
			linger = flushInterval
			batch.Reset(linger)
			continue
		}
		select {
		case <-wake:
			p.writeBatch()
			linger = flushInterval
			batch.Reset(linger)
		case <-due:
			if linger = p.nextLinger(linger, p.writeBatch()); linger > 0 {
				batch.Reset(linger)
			}
		case <-tick.C:
			p.writeTallies(false)      // drops in a burst that ended, with no event since
			p.handleErr(p.seg.flush()) // the syncer fsyncs it
			if p.seg.dueForAge() {
				p.handleErr(p.seg.seal())
			}
			p.noteOpenSegment()
		case <-p.stopWriter:
			batch.Stop()
			p.drainQueue(-1)
			p.writeTallies(true)
			p.handleErr(p.seg.close())
			p.seg.syncer.stop() // every seal done, fsynced and renamed
			p.openCreatedMs.Store(0)
			return
		}
	}
}

// nextLinger is the wait before the next batch, after n events came in
// the last wait: flushInterval, unless at the rate just seen the queue
// would fill past a quarter (a small QueueSize must not overflow while the
// writer waits); it grows back at most twofold per batch. 0 means go back
// to blocking on the queue: nothing came, or events come so fast that
// waiting cannot pay.
func (p *Pipeline) nextLinger(last time.Duration, n int) time.Duration {
	if n == 0 {
		return 0
	}
	quarter := max(p.queue.cap()/4, 1)
	next := min(flushInterval, 2*last, last*time.Duration(quarter)/time.Duration(n))
	if next < minLinger {
		return 0
	}
	return next
}

// minLinger is the shortest wait worth a timer.
const minLinger = 50 * time.Microsecond

// writeBatch writes what is queued now (at most one queue's worth, so the
// ticker is never starved) and hands the buffer to the kernel with one
// write, so a process crash loses at most what is still queued. It returns
// how many events it took.
func (p *Pipeline) writeBatch() int {
	n := p.drainQueue(p.queue.cap())
	p.writeTallies(false)
	p.handleErr(p.seg.flush())
	p.noteOpenSegment()
	return n
}

// drainQueue writes queued events without blocking, at most limit of them
// (all when limit < 0), and returns how many it wrote. It takes them in
// groups (see prepare), so the cache misses of one group overlap.
func (p *Pipeline) drainQueue(limit int) int {
	p.forgetSalts() // pick up a salt adopted since the last batch
	var group [writeGroup]*pending
	i := 0
	for limit < 0 || i < limit {
		n := 0
		for n < len(group) && (limit < 0 || i+n < limit) {
			pe := p.queue.pop()
			if pe == nil {
				break
			}
			group[n] = pe
			n++
		}
		if n == 0 {
			return i
		}
		p.writeAll(group[:n])
		clear(group[:n])
		if i/yieldEvery != (i+n)/yieldEvery && p.queue.Len() < p.queue.cap()/4 {
			runtime.Gosched()
		}
		i += n
	}
	return i
}

// yieldEvery is how many events the writer writes before it lets the
// other goroutines run. An edge pinned to one CPU runs with GOMAXPROCS
// 1, and Go preempts a goroutine only after 10 ms: a writer that drains
// a long queue in one go (after a slow fsync, or at a burst's start)
// would hold every redirect back that long. 256 events take about 150
// µs; a yield costs about as much as one event. A writer that has fallen
// behind (the queue a quarter full) does not yield: a dropped click is
// worse than a late redirect, and serving goroutines that never block
// (a benchmark's loop) would otherwise fill the queue between its turns.
const yieldEvery = 256

// writeAll writes events, writeGroup at a time: prepared together, then
// each enriched, hashed and appended.
func (p *Pipeline) writeAll(pes []*pending) {
	for len(pes) > 0 {
		g := pes[:min(len(pes), writeGroup)]
		pes = pes[len(g):]
		p.prepare(g)
		for _, pe := range g {
			p.writePrepared(pe)
		}
	}
}

// writeGroup is how many queued events the writer prepares together.
const writeGroup = 16

// prepare hashes each event's user agent for the enricher's cache and
// then reads each one's cache line, in a loop of independent loads. With
// tens of thousands of distinct user agents that table is not in the CPU
// caches while redirects run, and a lookup in write, one event at a time,
// waits out a whole memory access per event (most of the writer's time
// in enrichment, BenchmarkWriterDistinctVisitors); loads issued together
// wait out about one for the group.
func (p *Pipeline) prepare(group []*pending) {
	c := p.enrich.cache
	for _, pe := range group {
		pe.uaHash = c.hash(pe.ua)
	}
	var touched uint64
	for _, pe := range group {
		touched += c.sets[pe.uaHash&c.mask][0]
	}
	p.touched = touched // kept, so the loads are not dropped
}

// writePrepared enriches one event that prepare has seen, hashes the
// visitor, forgets the IP and appends the event to the open segment.
func (p *Pipeline) writePrepared(pe *pending) {
	pe.fillClick()
	ev := &pe.ev
	p.finish(pe)
	if err := CheckEvent(ev); err != nil {
		// The last guard: never write what the aggregator cannot decode
		// (one such record would make it refuse the whole segment).
		p.m.drop(DropInvalid)
		p.log.Debug("dropping an event that would not decode", "err", err)
		p.release(pe)
		return
	}
	err := p.seg.append(ev)
	p.noteOpenSegment()
	switch {
	case err == nil:
		p.m.written.Inc()
		if ev.Bot() {
			p.m.bots.Inc()
		}
	case errors.Is(err, errDiskCap):
		p.m.drop(DropDiskCap)
		p.tallyEvent(ev, 1)
	default:
		p.m.drop(DropIOError)
		p.tallyEvent(ev, 1)
		p.handleErr(err)
	}
	p.release(pe)
}

// noteOpenSegment keeps the open segment's creation time current for
// OldestPendingAge. A segment handed to the syncer for sealing is in
// sealingMs until it is renamed and counted as sealed.
func (p *Pipeline) noteOpenSegment() {
	var created int64
	if p.seg.f != nil {
		created = p.seg.created.UnixMilli()
	}
	if p.openCreatedMs.Load() != created {
		p.openCreatedMs.Store(created)
	}
}

// finish fills in what the edge request did not carry directly: node,
// region, event id, browser and OS with their versions, device, bot flag,
// country, subdivision, city and the visitor hash. After it the IP is
// gone.
func (p *Pipeline) finish(pe *pending) {
	ev := &pe.ev
	ev.Node, ev.Region = p.cfg.NodeID, p.cfg.Region
	p.idSeq++
	binary.BigEndian.PutUint64(ev.ID[:8], p.idSeq)
	_, _ = p.rng.Read(ev.ID[8:])
	info := p.userAgent(pe.ua, pe.uaHash)
	ev.Browser, ev.BrowserVersion, ev.OS, ev.OSVersion, ev.Device =
		info.browser, info.browserVersion, info.os, info.osVersion, info.device
	if info.bot {
		ev.Flags |= FlagBot
	}
	geo := p.enrich.locate(pe.ip)
	if pe.country != ([2]byte{}) {
		// The proxy's country wins; the database's region and city are
		// kept only when they lie in it.
		ev.Country = countryString(pe.country)
		if geo.country != ev.Country {
			geo = geoInfo{}
		}
	} else {
		ev.Country = geo.country
	}
	ev.Subdivision, ev.City = geo.region, geo.city
	scope := ev.SiteID
	if ev.Kind == KindClick {
		scope = ev.Code
	}
	day := dayNumber(time.UnixMilli(ev.Time))
	ev.VisitorHash, p.hashIn = visitorHash(p.saltOf(&p.salt, day), scope, pe.ip, pe.ua, p.hashIn)
	if ev.Kind != KindClick && sinceMidnightMS(ev.Time) < prevHashWindowMS {
		// A visit still going at midnight continues under a new hash; the
		// hash under yesterday's salt (still in memory) lets the aggregator
		// join the two. Clicks have no visits, so they go without.
		ev.PrevVisitorHash, p.hashIn = visitorHash(p.saltOf(&p.prevSalt, day-1), scope, pe.ip, pe.ua, p.hashIn)
	}
	clear(p.hashIn)
	pe.ip = netip.Addr{}
}

// userAgent classifies ua (h is its hash for the enricher's cache, from
// prepare), remembering the previous answer: consecutive events often
// come from one client, and comparing bytes is cheaper than a cache line.
func (p *Pipeline) userAgent(ua []byte, h uint64) uaInfo {
	if p.lastUA != nil && bytes.Equal(ua, p.lastUA) {
		return p.lastUI
	}
	p.lastUI = p.enrich.userAgentHashed(ua, h)
	p.lastUA = append(p.lastUA[:0], ua...)
	return p.lastUI
}

// daySalt caches one day's salt on the writer.
type daySalt struct {
	day int64
	key [16]byte
}

// noDay marks the cached salt as unknown.
const noDay = math.MinInt64

// prevHashWindowMS is how long after midnight UTC site events also carry
// the previous day's visitor hash: the visit gap, since an event later
// than that cannot continue a visit from before midnight.
const prevHashWindowMS = 30 * 60 * 1000

// sinceMidnightMS is the time of day of ms (Unix milliseconds) in UTC.
func sinceMidnightMS(ms int64) int64 {
	const dayMS = 86_400_000
	return ((ms % dayMS) + dayMS) % dayMS
}

// saltOf returns the salt of UTC day d (days since the epoch), caching it
// in c. The source is asked once per day per batch rather than per event;
// a salt adopted from a peer applies from the next batch.
func (p *Pipeline) saltOf(c *daySalt, d int64) [16]byte {
	if d != c.day {
		*c = daySalt{day: d, key: p.cfg.Salts.Salt(time.UnixMilli(d * 86_400_000).UTC())}
	}
	return c.key
}

// forgetSalts drops the cached salts, so the next batch asks again.
func (p *Pipeline) forgetSalts() {
	p.salt.day, p.prevSalt.day = noDay, noDay
}

// handleErr logs a writer error and counts the records a failed write lost.
func (p *Pipeline) handleErr(err error) {
	if err == nil {
		return
	}
	var we *writeError
	if errors.As(err, &we) {
		p.m.dropped[DropIOError].Add(we.dropped)
		// Encoded already, so whose they were is not known here.
		p.tallies.add(ScopeUnknown, "", p.now().UnixMilli(), uint64(we.dropped))
	}
	p.log.Error("segment write failed", "err", err)
}

// Close stops accepting events, drains the queue into the segment, fsyncs
// and seals it, and stops the shipper. Unshipped segments stay on disk for
// the next Open. Callers stop their HTTP servers first; an event captured
// after Close is dropped and counted.
func (p *Pipeline) Close(ctx context.Context) error {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	if p.closed.Swap(true) {
		return nil
	}
	close(p.stopWriter)
	var err error
	select {
	case <-p.writerDone:
	case <-ctx.Done():
		err = fmt.Errorf("cannot close ingest pipeline: %w", ctx.Err())
	}
	p.ship.stop()
	if err == nil {
		// Stragglers that slipped in after the writer drained.
		p.dropQueued()
		p.enrich.close()
		if c := p.classifier; c != nil {
			c.close()
		}
	}
	return err
}

func (p *Pipeline) dropQueued() {
	for pe := p.queue.pop(); pe != nil; pe = p.queue.pop() {
		p.m.drop(DropClosed)
		p.release(pe)
	}
}

// tallyInterval is how often the writer records drop tallies. Drops come
// in bursts when the writer is behind; between two records the table
// sums them, so a burst costs one record per link or site, not one per
// batch.
const tallyInterval = 250 * time.Millisecond

// writeTallies records the drops counted since the last time in the open
// segment, at most every tallyInterval unless final. One that cannot be
// written (the cap, a failed write) waits for the next time; final (the
// writer is stopping) writes past the cap, which the table bounds.
func (p *Pipeline) writeTallies(final bool) {
	if !final && time.Since(p.talliedAt) < tallyInterval {
		return
	}
	p.talliedAt = time.Now()
	p.tallies.drain(func(t *DropTally) bool {
		err := p.seg.appendTally(t, final)
		if err != nil && !errors.Is(err, errDiskCap) {
			p.handleErr(err)
		}
		return err == nil
	})
}

// QueueLen is how many captured events wait for the writer.
func (p *Pipeline) QueueLen() int { return p.queue.Len() }
