package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/edge/problem"
)

// The public port serves two kinds of client on one address: visitors and
// API users speak plain HTTP, and other nodes speak HTTPS with a client
// certificate of the cluster CA. The first byte tells them apart (a TLS
// connection opens with a handshake record, 0x16; an HTTP request with a
// method letter). The internal endpoints answer only the second kind.

// tlsRecordHandshake is the first byte of every TLS connection.
const tlsRecordHandshake = 0x16

// peerHandshakeTimeout bounds a peer's TLS handshake on the public port.
const peerHandshakeTimeout = 10 * time.Second

// sniffWrapper is edge.Config.WrapConn for the public port: cfg is the
// server side (RequireAndVerifyClientCert). The edge applies it above its
// lazy deadlines, which may fire early and be retried: a TLS write that
// timed out cannot be retried, so TLS must sit above them.
func sniffWrapper(cfg *tls.Config) func(net.Conn) net.Conn {
	return func(c net.Conn) net.Conn { return &sniffConn{Conn: c, cfg: cfg} }
}

// sniffConn decides on its first Read (on the server's per-connection
// goroutine, never in the accept loop) whether the client speaks TLS, and
// from then on reads and writes through the TLS connection if it does.
// It deliberately lacks Handshake and ConnectionState: fasthttp would take
// every connection for TLS and mark plain requests https (the stats proxy
// and every absolute URL would break). fromPeer finds it instead.
type sniffConn struct {
	net.Conn
	cfg *tls.Config

	once sync.Once
	tls  *tls.Conn // nil for a plain HTTP client
	rd   func([]byte) (int, error)
	wr   func([]byte) (int, error)
	err  error
}

func (c *sniffConn) decide() {
	c.once.Do(func() {
		var first [1]byte
		n, err := c.Conn.Read(first[:])
		if n == 0 {
			if err == nil {
				err = fmt.Errorf("empty read from %s", c.Conn.RemoteAddr())
			}
			c.err = err
			return
		}
		pc := &prefixConn{Conn: c.Conn, prefix: first[:1]}
		if first[0] != tlsRecordHandshake {
			c.rd, c.wr = pc.Read, c.Conn.Write
			return
		}
		tc := tls.Server(pc, c.cfg)
		ctx, cancel := context.WithTimeout(context.Background(), peerHandshakeTimeout)
		defer cancel()
		if err := tc.HandshakeContext(ctx); err != nil {
			c.err = fmt.Errorf("node TLS handshake from %s refused: %w", c.Conn.RemoteAddr(), err)
			return
		}
		c.tls, c.rd, c.wr = tc, tc.Read, tc.Write
	})
}

func (c *sniffConn) Read(p []byte) (int, error) {
	c.decide()
	if c.err != nil {
		return 0, c.err
	}
	return c.rd(p)
}

func (c *sniffConn) Write(p []byte) (int, error) {
	c.decide()
	if c.err != nil {
		return 0, c.err
	}
	return c.wr(p)
}

// peerState is the TLS state of a peer that showed a certificate of the
// cluster CA; ok is false for a plain HTTP client.
func (c *sniffConn) peerState() (st tls.ConnectionState, ok bool) {
	c.decide()
	if c.tls == nil {
		return st, false
	}
	return c.tls.ConnectionState(), true
}

// prefixConn gives back the byte sniffConn read before the rest.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// fromPeer reports whether the request came over TLS from a client that
// showed a certificate of the cluster CA.
func fromPeer(ctx *fasthttp.RequestCtx) bool {
	c := sniffConnOf(ctx.Conn())
	if c == nil {
		return false
	}
	st, ok := c.peerState()
	return ok && st.HandshakeComplete && len(st.VerifiedChains) > 0
}

// sniffConnOf finds the sniffConn under the connection fasthttp hands the
// handler. fasthttp may wrap it (a per-IP connection limit wraps it in a
// struct of its own that embeds it as Conn), so embedded Conn fields are
// followed, a few levels deep.
func sniffConnOf(c net.Conn) *sniffConn {
	for range 4 {
		if s, ok := c.(*sniffConn); ok {
			return s
		}
		v := reflect.ValueOf(c)
		if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
			return nil
		}
		f := v.Elem().FieldByName("Conn")
		if !f.IsValid() || !f.CanInterface() {
			return nil
		}
		inner, ok := f.Interface().(net.Conn)
		if !ok || inner == nil {
			return nil
		}
		c = inner
	}
	return nil
}

// requirePeer refuses a request that did not come from another node over
// mutual TLS, whatever token it carries.
func requirePeer(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if !fromPeer(ctx) {
			problem.Write(ctx, problem.Forbidden, "internal endpoints answer only other nodes, over TLS with a certificate of the cluster CA")
			return
		}
		h(ctx)
	}
}

// peerTransport is the HTTP transport for every call to another node's
// public port: HTTPS with this node's certificate.
func peerTransport(cfg *tls.Config) *http.Transport {
	return &http.Transport{
		MaxIdleConnsPerHost: 128, // forwarded writes run up to the client concurrency
		// A bound, so no traffic pattern can open an unbounded number of
		// connections to the leader; past it, requests queue.
		MaxConnsPerHost:     peerMaxConnsPerHost,
		IdleConnTimeout:     90 * time.Second,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		TLSClientConfig:     cfg,
		TLSHandshakeTimeout: 5 * time.Second,
	}
}
