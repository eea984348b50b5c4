package raft

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"

	hraft "github.com/hashicorp/raft"
)

// tlsHandshakeTimeout bounds a peer's handshake, so a client that connects
// and says nothing does not hold a raft connection goroutine.
const tlsHandshakeTimeout = 10 * time.Second

// tlsStreamLayer carries raft's transport over TLS: every accepted
// connection must complete a handshake under Config.TLS (which asks for
// and verifies a client certificate) before raft reads a byte from it, and
// every dial presents this node's certificate and verifies the peer's.
type tlsStreamLayer struct {
	ln        net.Listener
	advertise net.Addr
	cfg       *tls.Config // dialling
	server    *tls.Config // accepting: cfg plus the inbound check
}

var _ hraft.StreamLayer = (*tlsStreamLayer)(nil)

func newTLSStreamLayer(bind string, advertise net.Addr, cfg *tls.Config, inbound func(*x509.Certificate) error) (*tlsStreamLayer, error) {
	if cfg.ClientAuth != tls.RequireAndVerifyClientCert {
		return nil, errors.New("cannot configure raft TLS: ClientAuth must be RequireAndVerifyClientCert")
	}
	server := cfg.Clone()
	if inbound != nil {
		server.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("raft peer showed no certificate")
			}
			return inbound(cs.PeerCertificates[0])
		}
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	if advertise == nil {
		advertise = ln.Addr()
	}
	if tcp, ok := advertise.(*net.TCPAddr); !ok || tcp.IP == nil || tcp.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("raft address %v is not advertisable; set an advertise address", advertise)
	}
	return &tlsStreamLayer{ln: ln, advertise: advertise, cfg: cfg, server: server}, nil
}

// Accept returns the next connection; its first Read runs the handshake,
// and a peer without a certificate of the cluster CA gets an error there
// and a closed connection before raft decodes anything.
func (s *tlsStreamLayer) Accept() (net.Conn, error) {
	c, err := s.ln.Accept()
	if err != nil {
		return nil, err
	}
	return &handshakeConn{Conn: tls.Server(c, s.server)}, nil
}

func (s *tlsStreamLayer) Close() error   { return s.ln.Close() }
func (s *tlsStreamLayer) Addr() net.Addr { return s.advertise }

// Dial connects to a peer and finishes the handshake before raft writes.
func (s *tlsStreamLayer) Dial(addr hraft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: s.cfg}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", string(addr))
	if err != nil {
		return nil, fmt.Errorf("cannot dial raft peer %s over TLS: %w", addr, err)
	}
	return c, nil
}

// handshakeConn runs the server handshake, bounded in time, on raft's
// per-connection goroutine (the first Read) rather than in the accept
// loop, so one slow peer never holds up the others.
type handshakeConn struct {
	net.Conn // *tls.Conn
	done     bool
}

func (c *handshakeConn) Read(p []byte) (int, error) {
	if !c.done {
		ctx, cancel := context.WithTimeout(context.Background(), tlsHandshakeTimeout)
		err := c.Conn.(*tls.Conn).HandshakeContext(ctx)
		cancel()
		if err != nil {
			c.Conn.Close()
			return 0, fmt.Errorf("raft peer %s refused: %w", c.RemoteAddr(), err)
		}
		c.done = true
	}
	return c.Conn.Read(p)
}
