package raft

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
)

// testCA is a throw-away cluster CA; tlsConfig gives a node of it the
// config node.Start builds (both sides, client certificates required).
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

const testServerName = "node.waymark"

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key}
}

func (ca *testCA) tlsConfig(t testing.TB, roles ...string) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "node", OrganizationalUnit: roles},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{testServerName},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		RootCAs:      pool,
		ServerName:   testServerName,
	}
}

// votersOnly is the node's inbound check in miniature.
func votersOnly(leaf *x509.Certificate) error {
	for _, ou := range leaf.Subject.OrganizationalUnit {
		if ou == "voter" {
			return nil
		}
	}
	return errors.New("not a voter")
}

// requestVote sends one RequestVote over trans to addr and reports
// whether the target answered.
func requestVote(trans hraft.Transport, addr string) error {
	var resp hraft.RequestVoteResponse
	return trans.RequestVote("intruder", hraft.ServerAddress(addr), &hraft.RequestVoteRequest{
		RPCHeader: hraft.RPCHeader{ProtocolVersion: hraft.ProtocolVersionMax, ID: []byte("intruder"), Addr: []byte("127.0.0.1:1")}, Term: 1,
	}, &resp)
}

// TestTLSTransport: voters with certificates of one CA elect a leader and
// replicate over TLS; a plain-TCP raft client and a TLS client with a
// certificate of another CA get no answer from them, and a node dialling
// a server of another CA refuses it. The plain cluster at the start is
// the control: the same plain RPC gets an answer there (the hole the TLS
// transport closes).
func TestTLSTransport(t *testing.T) {
	plainTrans, err := hraft.NewTCPTransport("127.0.0.1:0", nil, 1, 2*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plainTrans.Close()

	t.Run("control: a plain cluster answers a plain client", func(t *testing.T) {
		c := newCluster(t, nil)
		v := c.add("p1", "us")
		c.bootstrap(v)
		if err := requestVote(plainTrans, v.node().Addr()); err != nil {
			t.Fatalf("plain RequestVote to a plain node: %v; want an answer", err)
		}
	})

	ca, other := newTestCA(t), newTestCA(t)
	c := newCluster(t, func(cfg *Config) {
		cfg.TLS = ca.tlsConfig(t, "voter")
		cfg.TLSInbound = votersOnly
	})
	v1, v2, v3 := c.add("v1", "us"), c.add("v2", "eu"), c.add("v3", "ap")
	c.bootstrap(v1, v2, v3)
	code := createThrough(t, v2, "https://example.com/over-tls")
	c.waitLinks(code)
	leaderAddr := c.leader().node().Addr()

	t.Run("plain TCP client is refused", func(t *testing.T) {
		if err := requestVote(plainTrans, leaderAddr); err == nil {
			t.Fatal("plain RequestVote to a TLS node got an answer; want the connection refused")
		}
	})

	t.Run("client with a certificate of another CA is refused", func(t *testing.T) {
		stream, err := newTLSStreamLayer("127.0.0.1:0", nil, other.tlsConfig(t, "voter"), nil)
		if err != nil {
			t.Fatal(err)
		}
		trans := hraft.NewNetworkTransport(stream, 1, 2*time.Second, nil)
		defer trans.Close()
		if err := requestVote(trans, leaderAddr); err == nil {
			t.Fatal("RequestVote with another CA's certificate got an answer; want it refused")
		}
	})

	t.Run("a member of the CA without the voter role is refused, a voter is answered", func(t *testing.T) {
		for _, tc := range []struct {
			roles  []string
			answer bool
		}{{[]string{"edge", "aggregator"}, false}, {[]string{"aggregator", "voter"}, true}} {
			stream, err := newTLSStreamLayer("127.0.0.1:0", nil, ca.tlsConfig(t, tc.roles...), nil)
			if err != nil {
				t.Fatal(err)
			}
			trans := hraft.NewNetworkTransport(stream, 1, 2*time.Second, nil)
			if err := requestVote(trans, leaderAddr); (err == nil) != tc.answer {
				t.Errorf("RequestVote with roles %v: got %v; want answered %v", tc.roles, err, tc.answer)
			}
			trans.Close()
		}
	})

	t.Run("client without a certificate is refused", func(t *testing.T) {
		cfg := ca.tlsConfig(t)
		cfg.Certificates = nil
		conn, err := tls.Dial("tcp", leaderAddr, cfg)
		if err == nil {
			// TLS 1.3: the server's verdict on the client arrives with the
			// first read.
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			_, err = conn.Read(make([]byte, 1))
			conn.Close()
		}
		if err == nil {
			t.Fatal("a TLS client without a certificate could read from raft; want it refused")
		}
	})

	t.Run("dialling a server of another CA fails", func(t *testing.T) {
		rogue, err := newTLSStreamLayer("127.0.0.1:0", nil, other.tlsConfig(t, "voter"), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer rogue.Close()
		go func() {
			for {
				c, err := rogue.Accept()
				if err != nil {
					return
				}
				go func() { c.Read(make([]byte, 1)); c.Close() }()
			}
		}()
		mine, err := newTLSStreamLayer("127.0.0.1:0", nil, ca.tlsConfig(t, "voter"), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer mine.Close()
		if conn, err := mine.Dial(hraft.ServerAddress(rogue.Addr().String()), 2*time.Second); err == nil {
			conn.Close()
			t.Fatal("dialled a raft server of another CA; want the handshake refused")
		}
	})

	t.Run("refuses a config that does not ask for client certificates", func(t *testing.T) {
		cfg := ca.tlsConfig(t)
		cfg.ClientAuth = tls.RequestClientCert
		if s, err := newTLSStreamLayer("127.0.0.1:0", nil, cfg, nil); err == nil {
			s.Close()
			t.Fatal("newTLSStreamLayer took ClientAuth RequestClientCert; want an error")
		}
	})

	t.Run("still replicates after the refusals", func(t *testing.T) {
		code := createThrough(t, v3, "https://example.com/after")
		c.waitLinks(code)
	})
}
