package harness

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// EventDroppedHeader is the header with which a Waymark node marks an event
// it answered 202 but did not store (rate limit, unknown site, full queue).
const EventDroppedHeader = "X-Waymark-Dropped"

// DesktopUserAgent is a current desktop browser, so the node classifies the
// benchmark's events as human pageviews rather than bots.
const DesktopUserAgent = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0.0.0 Safari/537.36"

// EventLoadConfig describes closed-loop POST /api/event load against one
// server, with Plausible-style pageview bodies.
type EventLoadConfig struct {
	Addr      string        // host:port, loopback only
	Domains   []string      // registered site domains; each request picks one at random
	Pages     int           // distinct page paths per domain; zero means 1000
	Visitors  int           // distinct X-Forwarded-For addresses; zero means 10000
	UserAgent string        // zero means DesktopUserAgent
	Conns     int           // concurrent connections, one worker each
	Warmup    time.Duration // load without recording
	Duration  time.Duration // the measured window
	Timeout   time.Duration // per read and per write; zero means 5 s
	Seed      uint64        // seeds each worker's choice of domain, page and visitor
}

// EventLoadResult is one event load run. The embedded LoadResult covers the
// measured window only: OK counts 202 answers without EventDroppedHeader,
// BadStatus every other answer (dropped 202s included), and Statuses every
// status code seen. The whole-run counters also cover the warm-up and the
// requests that ended after the window: they are what the server must have
// stored.
type EventLoadResult struct {
	LoadResult
	Dropped map[string]uint64 // EventDroppedHeader values seen in the window

	Accepted         uint64   // whole run: 202 without EventDroppedHeader
	AcceptedByDomain []uint64 // whole run, indexed like cfg.Domains
	Sent             uint64   // whole run: every request sent
	Unanswered       uint64   // whole run: requests without an answer; the server may or may not have stored them
}

// RunEventLoad drives cfg.Conns workers, each a keep-alive connection that
// posts one event, waits for the answer and posts the next, for
// Warmup+Duration. Every request carries Content-Type text/plain, an Origin
// matching its domain, cfg.UserAgent and an X-Forwarded-For address from a
// benchmark range (198.18.0.0/15), so a server behind a trusted proxy sees
// many visitors. Ending ctx stops the run early.
func RunEventLoad(ctx context.Context, cfg EventLoadConfig) (*EventLoadResult, error) {
	if len(cfg.Domains) == 0 {
		return nil, errors.New("cannot run event load: no domains")
	}
	if cfg.Conns <= 0 || cfg.Duration <= 0 {
		return nil, fmt.Errorf("cannot run event load: conns %d and duration %v must be positive", cfg.Conns, cfg.Duration)
	}
	if cfg.Pages <= 0 {
		cfg.Pages = 1000
	}
	if cfg.Visitors <= 0 {
		cfg.Visitors = 10000
	}
	cfg.Visitors = min(cfg.Visitors, 1<<17) // the size of 198.18.0.0/15
	if cfg.UserAgent == "" {
		cfg.UserAgent = DesktopUserAgent
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	hc := newLoadClient(cfg.Addr, cfg.Conns, cfg.Timeout)
	defer hc.CloseIdleConnections()

	var stop atomic.Bool
	defer stopWhenDone(ctx, &stop)()

	sites := make([]eventSite, len(cfg.Domains))
	for i, d := range cfg.Domains {
		sites[i] = eventSite{
			origin: []byte("https://" + d),
			head:   []byte(`{"n":"pageview","u":"https://` + d + `/p/`),
			tail:   []byte(`?x=1","d":"` + d + `","r":"https://ref.example/a"}`),
		}
	}
	begin := time.Now()
	window := loadWindow{start: begin.Add(cfg.Warmup)}
	window.end = window.start.Add(cfg.Duration)
	workers := make([]*eventWorker, cfg.Conns)
	var wg sync.WaitGroup
	for i := range workers {
		w := &eventWorker{
			cfg: &cfg, sites: sites, rng: rand.New(rand.NewPCG(cfg.Seed, uint64(i))),
			latency: NewHistogram(), accepted: make([]uint64, len(sites)), dropped: map[string]uint64{},
		}
		workers[i] = w
		wg.Go(func() { w.run(hc, window, &stop) })
	}
	wg.Wait()

	res := &EventLoadResult{
		LoadResult:       LoadResult{Elapsed: cfg.Duration, Statuses: make(map[int]uint64), Latency: NewHistogram()},
		Dropped:          map[string]uint64{},
		AcceptedByDomain: make([]uint64, len(sites)),
	}
	if stoppedAt := time.Now(); stoppedAt.Before(window.end) {
		res.Elapsed = max(stoppedAt.Sub(window.start), 0)
	}
	for _, w := range workers {
		w.mergeInto(res)
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("cannot finish event load run: %w", err)
	}
	return res, nil
}

// DroppedSummary returns the drop reasons seen, sorted, as "rate_limit:12".
func (r *EventLoadResult) DroppedSummary() string {
	s := ""
	for _, reason := range slices.Sorted(maps.Keys(r.Dropped)) {
		if s != "" {
			s += " "
		}
		s += fmt.Sprintf("%s:%d", reason, r.Dropped[reason])
	}
	return s
}

// eventSite holds the constant parts of one domain's requests.
type eventSite struct {
	origin     []byte
	head, tail []byte // body around the page number
}

type eventWorker struct {
	cfg     *EventLoadConfig
	sites   []eventSite
	rng     *rand.Rand
	body    []byte
	xff     []byte
	latency *Histogram

	// In the window.
	ok, bad, transport uint64
	statuses           [maxStatus]uint64
	dropped            map[string]uint64
	firstError         string

	// Whole run.
	accepted   []uint64 // per site
	sent       uint64
	unanswered uint64
}

// run is the hot loop; after the first request it allocates only to record
// a drop reason.
func (w *eventWorker) run(hc *fasthttp.HostClient, win loadWindow, stop *atomic.Bool) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI("/api/event")
	req.Header.SetHost(w.cfg.Addr)
	req.Header.SetContentType("text/plain")
	req.Header.SetUserAgent(w.cfg.UserAgent)
	for !stop.Load() {
		si := w.rng.IntN(len(w.sites))
		site := &w.sites[si]
		w.body = append(w.body[:0], site.head...)
		w.body = strconv.AppendInt(w.body, int64(w.rng.IntN(w.cfg.Pages)), 10)
		w.body = append(w.body, site.tail...)
		req.SetBody(w.body)
		v := w.rng.IntN(w.cfg.Visitors)
		w.xff = append(w.xff[:0], "198."...)
		w.xff = strconv.AppendInt(w.xff, int64(18+v>>16), 10)
		w.xff = append(w.xff, '.')
		w.xff = strconv.AppendInt(w.xff, int64(v>>8&0xff), 10)
		w.xff = append(w.xff, '.')
		w.xff = strconv.AppendInt(w.xff, int64(v&0xff), 10)
		req.Header.SetBytesV("X-Forwarded-For", w.xff)
		req.Header.SetBytesV("Origin", site.origin)

		t0 := time.Now()
		err := hc.Do(req, resp)
		t1 := time.Now()
		w.sent++
		status := resp.StatusCode()
		drop := resp.Header.Peek(EventDroppedHeader)
		accepted := err == nil && status == fasthttp.StatusAccepted && len(drop) == 0
		switch {
		case err != nil:
			w.unanswered++
		case accepted:
			w.accepted[si]++
		}
		if t1.Before(win.start) || !t1.Before(win.end) {
			if !t1.Before(win.end) {
				return
			}
			continue
		}
		if err != nil {
			w.transport++
			w.noteError(err.Error())
			continue
		}
		w.latency.Record(t1.Sub(t0))
		if status < 0 || status >= maxStatus {
			status = 0
		}
		w.statuses[status]++
		switch {
		case accepted:
			w.ok++
		case len(drop) > 0:
			w.bad++
			w.dropped[string(drop)]++
			w.noteError("202 dropped: " + string(drop))
		default:
			w.bad++
			w.noteError(fmt.Sprintf("status %d: %.200s", status, resp.Body()))
		}
	}
}

func (w *eventWorker) noteError(s string) {
	if w.firstError == "" {
		w.firstError = s
	}
}

func (w *eventWorker) mergeInto(res *EventLoadResult) {
	res.Latency.Merge(w.latency)
	res.OK += w.ok
	res.BadStatus += w.bad
	res.TransportErrors += w.transport
	if res.FirstError == "" {
		res.FirstError = w.firstError
	}
	for status, n := range w.statuses {
		if n > 0 {
			res.Statuses[status] += n
		}
	}
	for reason, n := range w.dropped {
		res.Dropped[reason] += n
	}
	for i, n := range w.accepted {
		res.AcceptedByDomain[i] += n
		res.Accepted += n
	}
	res.Sent += w.sent
	res.Unanswered += w.unanswered
}
