package harness

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// newLoadClient is the client the load generators drive a target with: one
// connection per worker, paths sent as given, and no automatic retries (a
// retry would hide an error, skew latency, or store an event twice).
func newLoadClient(addr string, conns int, timeout time.Duration) *fasthttp.HostClient {
	return &fasthttp.HostClient{
		Addr:                      addr,
		MaxConns:                  conns,
		MaxConnWaitTimeout:        timeout,
		ReadTimeout:               timeout,
		WriteTimeout:              timeout,
		MaxIdleConnDuration:       time.Minute,
		MaxIdemponentCallAttempts: 1,
		NoDefaultUserAgentHeader:  true,
		DisablePathNormalizing:    true,
	}
}

// stopWhenDone sets stop once ctx ends. Call the returned func when the run
// is over so the watcher goroutine exits.
func stopWhenDone(ctx context.Context, stop *atomic.Bool) (release func()) {
	runDone := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			stop.Store(true)
		case <-runDone:
		}
	}()
	return func() { close(runDone) }
}
