package node

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// wrapListener applies a WrapConn the way edge.Server does.
type wrapListener struct {
	net.Listener
	wrap func(net.Conn) net.Conn
}

func (l wrapListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.wrap(c), nil
}

// TestSniffConn: on one port, a plain HTTP client is served as plain (not
// marked TLS, so absolute URLs and the stats proxy stay http) and is not a
// peer; an HTTPS client with a node certificate is a peer, also behind
// fasthttp's per-IP connection limit, which wraps the connection; an HTTPS
// client with another CA's certificate is refused at the handshake.
func TestSniffConn(t *testing.T) {
	caPEM, caKey, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca := writeTemp(t, dir, "ca.pem", caPEM)
	load := func(name string, caPEM, caKey []byte, caFile string) *peerTLS {
		cert, key, err := IssueNodeCert(caPEM, caKey, name, []Role{RoleVoter}, 1, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		p, err := loadPeerTLS(writeTemp(t, dir, name+".pem", cert), writeTemp(t, dir, name+"-key.pem", key), caFile)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	server, client := load("srv", caPEM, caKey, ca), load("cli", caPEM, caKey, ca)
	otherPEM, otherKey, _ := NewCA()
	rogue := load("rogue", otherPEM, otherKey, writeTemp(t, dir, "other.pem", otherPEM))
	rogueCfg := rogue.clientConfig()
	rogueCfg.RootCAs = server.pool // it trusts the server; only its own certificate is foreign

	for _, perIP := range []int{0, 10} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &fasthttp.Server{MaxConnsPerIP: perIP, ReadTimeout: 5 * time.Second, Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.Response.Header.Set("X-Peer", map[bool]string{true: "yes", false: "no"}[fromPeer(ctx)])
			ctx.Response.Header.Set("X-Scheme", string(ctx.URI().Scheme()))
		}}
		go srv.Serve(wrapListener{ln, sniffWrapper(server.serverConfig())})
		get := func(c *http.Client, scheme string) (peer, urlScheme string, err error) {
			resp, err := c.Get(scheme + "://" + ln.Addr().String() + "/x")
			if err != nil {
				return "", "", err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp.Header.Get("X-Peer"), resp.Header.Get("X-Scheme"), nil
		}
		if peer, scheme, err := get(&http.Client{}, "http"); err != nil || peer != "no" || scheme != "http" {
			t.Errorf("per-IP %d, plain: peer %q scheme %q %v; want no, http", perIP, peer, scheme, err)
		}
		if peer, _, err := get(&http.Client{Transport: &http.Transport{TLSClientConfig: client.clientConfig()}}, "https"); err != nil || peer != "yes" {
			t.Errorf("per-IP %d, node certificate: peer %q %v; want yes", perIP, peer, err)
		}
		if _, _, err := get(&http.Client{Transport: &http.Transport{TLSClientConfig: rogueCfg}}, "https"); err == nil {
			t.Errorf("per-IP %d, another CA's certificate: answered; want the handshake refused", perIP)
		}
		noCert := client.clientConfig()
		noCert.Certificates = nil
		if _, _, err := get(&http.Client{Transport: &http.Transport{TLSClientConfig: noCert}}, "https"); err == nil {
			t.Errorf("per-IP %d, no certificate: answered; want the handshake refused", perIP)
		}
		srv.Shutdown()
	}
}
