package harness

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// LoadConfig describes one closed-loop load run against one server.
type LoadConfig struct {
	Addr       string        // host:port, loopback only
	Host       string        // the Host header; empty: Addr
	Paths      [][]byte      // request URIs ("/abc1234"); each request picks one at random
	Conns      int           // concurrent connections, one worker each
	Warmup     time.Duration // load without recording, to fill caches and pools
	Duration   time.Duration // the measured window
	WantStatus int           // the answer that counts as success; zero means 302
	Timeout    time.Duration // per read and per write; zero means 5 s
	Seed       uint64        // seeds the per-worker path choice

	// EachOnce requests every path exactly once, in order, spread over the
	// workers, and then stops: a priming pass. Warmup is ignored and
	// Duration only caps the pass; the whole pass is the measured window.
	EachOnce bool

	// Visitors, when set, gives every request the User-Agent and
	// X-Forwarded-For of a visitor picked at random (see MakeVisitors).
	// Without it requests carry neither header.
	Visitors []Visitor

	// AtWindowStart and AtWindowEnd, when set, are called (from their own
	// goroutine) as the measured window opens and closes, for readings
	// that must cover exactly the window, such as a server's CPU time.
	AtWindowStart, AtWindowEnd func()
}

// LoadResult is what one run measured inside its window. Only requests that
// completed inside the window count.
type LoadResult struct {
	Elapsed         time.Duration  // length of the measured window
	OK              uint64         // answers with the wanted status
	BadStatus       uint64         // answers with any other status
	TransportErrors uint64         // requests that got no answer
	Statuses        map[int]uint64 // every status seen, wanted one included
	FirstError      string         // first transport error or bad status, for the report
	Latency         *Histogram     // every answered request

	// Whole run, warm-up and each worker's last request past the window
	// included: what the server saw.
	TotalOK         uint64 // answers with the wanted status
	TotalAnswered   uint64 // answers of any status
	TotalUnanswered uint64 // requests that got no answer
}

// RPS returns successful requests per second.
func (r *LoadResult) RPS() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.OK) / r.Elapsed.Seconds()
}

// Errors returns failed requests of any kind.
func (r *LoadResult) Errors() uint64 { return r.BadStatus + r.TransportErrors }

// RunLoad drives cfg.Conns workers against cfg.Addr for Warmup+Duration and
// returns what happened in the Duration window. Each worker keeps one
// keep-alive connection busy: send, wait for the answer, send again. The
// redirect is never followed. Ending ctx stops the run early; the window is
// then shortened to what was measured.
func RunLoad(ctx context.Context, cfg LoadConfig) (*LoadResult, error) {
	if len(cfg.Paths) == 0 {
		return nil, errors.New("cannot run load: no request paths")
	}
	if cfg.Conns <= 0 || cfg.Duration <= 0 {
		return nil, fmt.Errorf("cannot run load: conns %d and duration %v must be positive", cfg.Conns, cfg.Duration)
	}
	if cfg.WantStatus == 0 {
		cfg.WantStatus = fasthttp.StatusFound
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	hc := newLoadClient(cfg.Addr, cfg.Conns, cfg.Timeout)
	defer hc.CloseIdleConnections()

	var stop atomic.Bool
	defer stopWhenDone(ctx, &stop)()

	if cfg.EachOnce {
		cfg.Warmup = 0
	}
	begin := time.Now()
	window := loadWindow{start: begin.Add(cfg.Warmup)}
	window.end = window.start.Add(cfg.Duration)
	var shared *atomic.Int64
	if cfg.EachOnce {
		shared = new(atomic.Int64)
	}
	workers := make([]*loadWorker, cfg.Conns)
	var wg sync.WaitGroup
	for i := range workers {
		w := newLoadWorker(cfg, i, shared)
		workers[i] = w
		wg.Go(func() { w.run(hc, window, &stop, cfg.WantStatus) })
	}
	hooksDone := callWindowHooks(ctx, cfg, window)
	wg.Wait()
	<-hooksDone

	res := &LoadResult{Elapsed: cfg.Duration, Statuses: make(map[int]uint64), Latency: NewHistogram()}
	if stoppedAt := time.Now(); stoppedAt.Before(window.end) {
		res.Elapsed = max(stoppedAt.Sub(window.start), 0) // stopped early, or EachOnce ran out of paths
	}
	for _, w := range workers {
		w.mergeInto(res, cfg.WantStatus)
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("cannot finish load run: %w", err)
	}
	return res, nil
}

type loadWindow struct{ start, end time.Time }

// callWindowHooks calls cfg's window hooks at the window's start and end,
// or at once if ctx ends first (the run is then cut short anyway). The
// returned channel closes once both have returned.
func callWindowHooks(ctx context.Context, cfg LoadConfig, win loadWindow) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, h := range []struct {
			at time.Time
			fn func()
		}{{win.start, cfg.AtWindowStart}, {win.end, cfg.AtWindowEnd}} {
			if h.fn == nil {
				continue
			}
			t := time.NewTimer(time.Until(h.at))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
			h.fn()
		}
	}()
	return done
}

// maxStatus bounds the per-worker status table; anything else is counted in
// the last slot as status 0 ("unparseable").
const maxStatus = 600

type loadWorker struct {
	paths      [][]byte
	visitors   []Visitor
	addr       string
	host       string        // the Host header
	rng        *rand.Rand    // picks a random path, unless shared is set
	shared     *atomic.Int64 // next path index, shared by all workers (EachOnce)
	latency    *Histogram
	statuses   [maxStatus]uint64
	transport  uint64
	firstError string

	totalOK, totalAnswered, totalUnanswered uint64
}

func newLoadWorker(cfg LoadConfig, i int, shared *atomic.Int64) *loadWorker {
	return &loadWorker{
		paths:    cfg.Paths,
		visitors: cfg.Visitors,
		addr:     cfg.Addr,
		host:     cmp.Or(cfg.Host, cfg.Addr),
		rng:      rand.New(rand.NewPCG(cfg.Seed, uint64(i))),
		shared:   shared,
		latency:  NewHistogram(),
	}
}

// pick returns the next path to request, or false when an EachOnce pass
// has handed out every path.
func (w *loadWorker) pick() ([]byte, bool) {
	if w.shared == nil {
		return w.paths[w.rng.IntN(len(w.paths))], true
	}
	i := w.shared.Add(1) - 1
	if i >= int64(len(w.paths)) {
		return nil, false
	}
	return w.paths[i], true
}

// run is the hot loop: nothing in it allocates per request.
func (w *loadWorker) run(hc *fasthttp.HostClient, win loadWindow, stop *atomic.Bool, want int) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetHost(w.host)
	for !stop.Load() {
		path, ok := w.pick()
		if !ok {
			return
		}
		req.SetRequestURIBytes(path)
		if len(w.visitors) > 0 {
			v := &w.visitors[w.rng.IntN(len(w.visitors))]
			req.Header.SetUserAgentBytes(v.UserAgent)
			req.Header.SetBytesV("X-Forwarded-For", v.ForwardedFor)
		}
		t0 := time.Now()
		err := hc.Do(req, resp)
		t1 := time.Now()
		if err != nil {
			w.totalUnanswered++
		} else {
			w.totalAnswered++
			if resp.StatusCode() == want {
				w.totalOK++
			}
		}
		if !t1.Before(win.end) {
			return
		}
		if t1.Before(win.start) {
			continue
		}
		if err != nil {
			w.transport++
			if w.firstError == "" {
				w.firstError = err.Error()
			}
			continue
		}
		w.latency.Record(t1.Sub(t0))
		status := resp.StatusCode()
		if status < 0 || status >= maxStatus {
			status = 0
		}
		w.statuses[status]++
	}
}

func (w *loadWorker) mergeInto(res *LoadResult, want int) {
	res.Latency.Merge(w.latency)
	res.TotalOK += w.totalOK
	res.TotalAnswered += w.totalAnswered
	res.TotalUnanswered += w.totalUnanswered
	res.TransportErrors += w.transport
	if res.FirstError == "" {
		res.FirstError = w.firstError
	}
	for status, n := range w.statuses {
		if n == 0 {
			continue
		}
		res.Statuses[status] += n
		if status == want {
			res.OK += n
			continue
		}
		res.BadStatus += n
		if res.FirstError == "" {
			res.FirstError = fmt.Sprintf("status %d", status)
		}
	}
}

// StatusSummary returns the statuses seen, sorted, as "302:1234 404:2".
func (r *LoadResult) StatusSummary() string {
	s := ""
	for _, status := range slices.Sorted(maps.Keys(r.Statuses)) {
		if s != "" {
			s += " "
		}
		s += fmt.Sprintf("%d:%d", status, r.Statuses[status])
	}
	return s
}
