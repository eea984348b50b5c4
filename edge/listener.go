package edge

import (
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// Out of descriptors (EMFILE), fasthttp treats a failed accept as the end
// of the listener and stops serving for good, while the process lives on.
// guardedListener stands between them: it retries accepts that fail for
// want of a resource, backing off, and reports the condition, so the
// server comes back by itself as soon as descriptors are free again. It
// also caps connections in all and per client address, answering past
// the cap with an RFC 9457 problem (fasthttp's own caps answer plain
// text).

const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

// Connection caps; zero values in Config take these.
const (
	defaultMaxConns      = 16384
	defaultMaxConnsPerIP = 1024
)

// The answers past the caps, written before the connection is closed.
var (
	rejectConnsPerIP = rejectResponse("429 Too Many Requests", `{"type":"/problems/too-many-connections","title":"Too many connections","status":429,"detail":"this address has too many connections open; reuse them"}`)
	rejectConns      = rejectResponse("503 Service Unavailable", `{"type":"/problems/unavailable","title":"Service unavailable","status":503,"detail":"the server is at its connection limit; retry shortly"}`)
)

func rejectResponse(status, body string) []byte {
	return []byte("HTTP/1.1 " + status + "\r\nConnection: close\r\nContent-Type: application/problem+json\r\nCache-Control: no-store\r\nRetry-After: 1\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

// listenerState is what readiness reads about the public listener.
type listenerState struct {
	failing atomic.Bool           // the last accept failed for want of a resource
	lastErr atomic.Pointer[error] // that failure
	dead    atomic.Pointer[error] // Serve ended with an error: the listener is gone
}

type guardedListener struct {
	net.Listener
	state              *listenerState
	maxConns, maxPerIP int
	log                func(msg string, args ...any)

	retries, rejected *metrics.Counter

	mu    sync.Mutex
	open  int
	perIP map[clientKey]int
}

func newGuardedListener(ln net.Listener, state *listenerState, maxConns, maxPerIP int, set *metrics.Set, log func(string, ...any)) *guardedListener {
	return &guardedListener{
		Listener: ln, state: state, maxConns: maxConns, maxPerIP: maxPerIP, log: log,
		retries:  set.GetOrCreateCounter("waymark_http_accept_retries_total"),
		rejected: set.GetOrCreateCounter("waymark_http_connections_rejected_total"),
		perIP:    make(map[clientKey]int),
	}
}

// temporaryAccept reports whether an accept failed for want of a resource
// that frees up again (descriptors, buffers) or for one aborted client.
func temporaryAccept(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (l *guardedListener) Accept() (net.Conn, error) {
	backoff := acceptBackoffMin
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if !temporaryAccept(err) {
				return nil, err
			}
			if !l.state.failing.Swap(true) {
				l.log("cannot accept connections; retrying until it works", "err", err)
			}
			l.state.lastErr.Store(&err)
			l.retries.Inc()
			time.Sleep(backoff)
			backoff = min(2*backoff, acceptBackoffMax)
			continue
		}
		if l.state.failing.Swap(false) {
			l.log("accepting connections again")
		}
		backoff = acceptBackoffMin
		if tc, ok := l.admit(c); ok {
			return tc, nil
		}
	}
}

// admit counts c against the caps, or answers it with a problem and
// closes it.
func (l *guardedListener) admit(c net.Conn) (net.Conn, bool) {
	var key clientKey
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		copy(key[:], a.IP.To16())
	}
	l.mu.Lock()
	reject := rejectConns
	if l.open < l.maxConns {
		reject = nil
		if l.perIP[key] >= l.maxPerIP {
			reject = rejectConnsPerIP
		}
	}
	if reject == nil {
		l.open++
		l.perIP[key]++
	}
	l.mu.Unlock()
	if reject != nil {
		l.rejected.Inc()
		go func() {
			c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			c.Write(reject)
			c.Close()
		}()
		return nil, false
	}
	return &trackedConn{Conn: c, l: l, key: key}, true
}

func (l *guardedListener) release(key clientKey) {
	l.mu.Lock()
	l.open--
	if n := l.perIP[key] - 1; n > 0 {
		l.perIP[key] = n
	} else {
		delete(l.perIP, key)
	}
	l.mu.Unlock()
}

// trackedConn gives its slot back on the first Close.
type trackedConn struct {
	net.Conn
	l      *guardedListener
	key    clientKey
	closed atomic.Bool
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	if !c.closed.Swap(true) {
		c.l.release(c.key)
	}
	return err
}

func (c *trackedConn) SetKeepAlive(on bool) error {
	if k, ok := c.Conn.(interface{ SetKeepAlive(bool) error }); ok {
		return k.SetKeepAlive(on)
	}
	return nil
}

func (c *trackedConn) SetKeepAlivePeriod(d time.Duration) error {
	if k, ok := c.Conn.(interface{ SetKeepAlivePeriod(time.Duration) error }); ok {
		return k.SetKeepAlivePeriod(d)
	}
	return nil
}

// ListenerHealth reports whether the public listener is accepting: false
// while accepts fail for want of descriptors (it recovers by itself) and
// for good once Serve has ended with an error.
func (s *Server) ListenerHealth() (bool, string) {
	if err := s.lnState.dead.Load(); err != nil {
		return false, "public listener failed: " + (*err).Error()
	}
	if s.lnState.failing.Load() {
		detail := "cannot accept connections"
		if err := s.lnState.lastErr.Load(); err != nil {
			detail += ": " + (*err).Error()
		}
		return false, detail
	}
	return true, "accepting"
}
