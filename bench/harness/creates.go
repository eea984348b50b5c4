package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// CreateLoadConfig describes a closed-loop load of POST /v1/links against
// one node.
type CreateLoadConfig struct {
	Addr    string   // host:port of the node that takes the creates, loopback only
	APIKeys []string // worker w uses key w % len(APIKeys); the node limits writes per key
	Conns   int      // concurrent keep-alive connections, one worker each

	// Without Count: Warmup of unmeasured creates, then the Duration window.
	// With Count: run until Count creates are acknowledged (a few more may
	// land, one per worker at most); Duration caps the whole run and Warmup
	// is ignored.
	Warmup   time.Duration
	Duration time.Duration
	Count    int

	// KeepEvery keeps the code of every KeepEvery-th acknowledged create of
	// each worker in CreateResult.Codes; zero keeps none.
	KeepEvery int
	// RunID goes into every destination URL, so two runs never send the
	// same body; empty means one derived from the clock.
	RunID   string
	Timeout time.Duration // per request; zero means 10 s
	// Progress, with Count, gets a line every 10 %.
	Progress io.Writer
	// MaxFailuresInRow stops the whole run with an error once a worker has
	// failed that many creates in a row (the node is likely gone); zero
	// means 200.
	MaxFailuresInRow int
}

// CreateResult is what a create load measured. Without Count only the
// creates answered inside the window count.
type CreateResult struct {
	Elapsed time.Duration
	Created uint64 // answered 201
	// Unmeasured counts creates acknowledged during the warmup or after the
	// window: links that exist but are not in the figures.
	Unmeasured      uint64
	BadStatus       uint64         // answered anything else
	TransportErrors uint64         // got no answer
	Statuses        map[int]uint64 // every status seen
	FirstError      string
	Latency         *Histogram // acknowledged creates only
	Codes           []string   // see KeepEvery
}

// PerSecond returns acknowledged creates per second.
func (r *CreateResult) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Created) / r.Elapsed.Seconds()
}

// Errors returns the creates that failed in any way.
func (r *CreateResult) Errors() uint64 { return r.BadStatus + r.TransportErrors }

// RunCreates drives cfg.Conns workers that each send a create, wait for the
// answer and send the next one, without Idempotency-Key (the cheapest
// create). Failed creates are counted, not retried; after a 429 or 503 the
// worker pauses briefly. Ending ctx stops the run early and returns what
// was measured with the error.
func RunCreates(ctx context.Context, cfg CreateLoadConfig) (*CreateResult, error) {
	if len(cfg.APIKeys) == 0 {
		return nil, errors.New("cannot run creates: no API key")
	}
	if cfg.Conns <= 0 || cfg.Duration <= 0 || cfg.Count < 0 {
		return nil, fmt.Errorf("cannot run creates: conns %d and duration %v must be positive, count %d not negative", cfg.Conns, cfg.Duration, cfg.Count)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.MaxFailuresInRow <= 0 {
		cfg.MaxFailuresInRow = 200
	}
	if cfg.RunID == "" {
		cfg.RunID = strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	if cfg.Count > 0 {
		cfg.Warmup = 0
	}
	hc := &fasthttp.HostClient{
		Addr:                     cfg.Addr,
		MaxConns:                 cfg.Conns,
		MaxConnWaitTimeout:       cfg.Timeout,
		ReadTimeout:              cfg.Timeout,
		WriteTimeout:             cfg.Timeout,
		MaxIdleConnDuration:      time.Minute,
		NoDefaultUserAgentHeader: true,
	}
	defer hc.CloseIdleConnections()

	run := &createRun{cfg: cfg, hc: hc, progress: newProgress(cfg.Progress, cfg.Count)}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	run.cancel = cancel
	go func() {
		<-ctx.Done()
		run.stop.Store(true)
	}()

	begin := time.Now()
	run.start = begin.Add(cfg.Warmup)
	run.end = run.start.Add(cfg.Duration)
	workers := make([]*createWorker, cfg.Conns)
	var wg sync.WaitGroup
	for i := range workers {
		w := &createWorker{run: run, id: i, key: "Bearer " + cfg.APIKeys[i%len(cfg.APIKeys)], latency: NewHistogram()}
		workers[i] = w
		wg.Go(w.loop)
	}
	wg.Wait()

	res := &CreateResult{Elapsed: cfg.Duration, Statuses: make(map[int]uint64), Latency: NewHistogram()}
	if stopped := time.Now(); stopped.Before(run.end) {
		res.Elapsed = max(stopped.Sub(run.start), 0) // Count reached, or stopped early
	}
	for _, w := range workers {
		w.mergeInto(res)
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, errCountReached) {
		return res, fmt.Errorf("cannot finish create load: %w", err)
	}
	return res, nil
}

// errCountReached ends a Count run; it is not a failure.
var errCountReached = errors.New("count reached")

type createRun struct {
	cfg        CreateLoadConfig
	hc         *fasthttp.HostClient
	start, end time.Time
	stop       atomic.Bool
	cancel     context.CancelCauseFunc
	created    atomic.Int64 // Count runs only
	progress   *progress
}

type createWorker struct {
	run        *createRun
	id         int
	key        string
	latency    *Histogram
	statuses   [maxStatus]uint64
	transport  uint64
	firstError string
	codes      []string
	acked      int    // this worker's acknowledged creates, for KeepEvery
	unmeasured uint64 // acknowledged outside the window
}

var (
	createPath       = []byte("/v1/links")
	jsonContentType  = []byte("application/json")
	linksPathSegment = []byte("/v1/links/")
)

func (w *createWorker) loop() {
	r := w.run
	cfg := r.cfg
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURIBytes(createPath)
	req.Header.SetHost(cfg.Addr)
	req.Header.SetContentTypeBytes(jsonContentType)
	req.Header.Set("Authorization", w.key)
	prefix := fmt.Sprintf(`{"url":"https://example.com/c/%s/%d/`, cfg.RunID, w.id)
	body := make([]byte, 0, len(prefix)+24)
	failuresInRow := 0
	for seq := 0; !r.stop.Load(); seq++ {
		if cfg.Count > 0 && r.created.Load() >= int64(cfg.Count) {
			return
		}
		body = strconv.AppendInt(append(body[:0], prefix...), int64(seq), 10)
		body = append(body, `"}`...)
		req.SetBodyRaw(body)
		t0 := time.Now()
		err := r.hc.Do(req, resp)
		t1 := time.Now()
		status := 0
		if err == nil {
			status = resp.StatusCode()
		}
		if !t1.Before(r.end) {
			w.outside(status)
			return
		}
		if t1.Before(r.start) {
			w.outside(status)
			continue
		}
		if status == fasthttp.StatusCreated {
			failuresInRow = 0
			w.latency.Record(t1.Sub(t0))
			w.statuses[status]++
			w.keep(resp)
			if cfg.Count > 0 {
				n := r.created.Add(1)
				r.progress.report(int(min(n, int64(cfg.Count))))
				if n >= int64(cfg.Count) {
					r.cancel(errCountReached)
				}
			}
			continue
		}
		w.fail(err, status, resp)
		if failuresInRow++; failuresInRow >= cfg.MaxFailuresInRow {
			r.cancel(fmt.Errorf("worker %d failed %d creates in a row, the last: %s", w.id, failuresInRow, w.describe(err, status, resp)))
			return
		}
		if status == fasthttp.StatusTooManyRequests || status == fasthttp.StatusServiceUnavailable || err != nil {
			time.Sleep(50 * time.Millisecond) // the node asked for less, or is not there
		}
	}
}

// outside counts a create answered outside the measured window: it is
// not measured, but the link exists all the same.
func (w *createWorker) outside(status int) {
	if status == fasthttp.StatusCreated {
		w.unmeasured++
	}
}

func (w *createWorker) fail(err error, status int, resp *fasthttp.Response) {
	if err != nil {
		w.transport++
	} else {
		if status < 0 || status >= maxStatus {
			status = 0
		}
		w.statuses[status]++
	}
	if w.firstError == "" {
		w.firstError = w.describe(err, status, resp)
	}
}

func (w *createWorker) describe(err error, status int, resp *fasthttp.Response) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("status %d: %s", status, truncate(resp.Body(), 200))
}

// keep records the new code, read from the Location header
// (".../v1/links/CODE"), when this create is one KeepEvery asks for.
func (w *createWorker) keep(resp *fasthttp.Response) {
	every := w.run.cfg.KeepEvery
	if every <= 0 {
		return
	}
	w.acked++
	if w.acked%every != 0 {
		return
	}
	loc := resp.Header.Peek("Location")
	if i := bytes.LastIndex(loc, linksPathSegment); i >= 0 && i+len(linksPathSegment) < len(loc) {
		w.codes = append(w.codes, string(loc[i+len(linksPathSegment):]))
	}
}

func (w *createWorker) mergeInto(res *CreateResult) {
	res.Latency.Merge(w.latency)
	res.TransportErrors += w.transport
	res.Unmeasured += w.unmeasured
	if res.FirstError == "" {
		res.FirstError = w.firstError
	}
	res.Codes = append(res.Codes, w.codes...)
	for status, n := range w.statuses {
		if n == 0 {
			continue
		}
		res.Statuses[status] += n
		if status == fasthttp.StatusCreated {
			res.Created += n
		} else {
			res.BadStatus += n
		}
	}
}
