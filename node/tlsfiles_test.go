package node

import (
	"bytes"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func writeTemp(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadPeerTLS(t *testing.T) {
	dir := t.TempDir()
	caPEM, caKey, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	otherPEM, otherKey, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := IssueNodeCert(caPEM, caKey, "v1", []Role{RoleVoter}, 30, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ca := writeTemp(t, dir, "ca.pem", caPEM)
	certF, keyF := writeTemp(t, dir, "v1.pem", cert), writeTemp(t, dir, "v1-key.pem", key)
	p, err := loadPeerTLS(certF, keyF, ca)
	if err != nil {
		t.Fatalf("a node certificate of the CA: %v", err)
	}
	leaf := p.cert.Leaf
	if !slicesHas(leaf.DNSNames, PeerServerName) || !slicesHas(leaf.DNSNames, "v1") {
		t.Errorf("DNS names %q; want %q and the node name", leaf.DNSNames, PeerServerName)
	}
	if len(leaf.ExtKeyUsage) != 2 || leaf.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth || leaf.ExtKeyUsage[1] != x509.ExtKeyUsageClientAuth {
		t.Errorf("ext key usage %v; want server and client auth", leaf.ExtKeyUsage)
	}

	if err := p.checkIdentity("v1", []Role{RoleVoter, RoleAggregator}); err != nil {
		t.Errorf("v1's own certificate: %v", err)
	}
	if err := p.checkIdentity("v2", []Role{RoleEdge}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("v1's certificate on node v2: got %v; want ErrBadConfig", err)
	}
	if err := raftInbound(leaf); err != nil {
		t.Errorf("raft refuses a voter: %v", err)
	}
	edgeCert, edgeKey, _ := IssueNodeCert(caPEM, caKey, "e1", []Role{RoleEdge, RoleAggregator}, 30, nil, nil)
	e, err := loadPeerTLS(writeTemp(t, dir, "e1.pem", edgeCert), writeTemp(t, dir, "e1-key.pem", edgeKey), ca)
	if err != nil {
		t.Fatal(err)
	}
	if err := raftInbound(e.cert.Leaf); err == nil {
		t.Error("raft admits an edge's certificate; want it refused")
	}
	if err := e.checkIdentity("e1", []Role{RoleVoter}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("an edge certificate on a voter: got %v; want ErrBadConfig", err)
	}

	otherCA := writeTemp(t, dir, "other.pem", otherPEM)
	if _, err := loadPeerTLS(certF, keyF, otherCA); !errors.Is(err, ErrBadConfig) {
		t.Errorf("certificate checked against another CA: got %v; want ErrBadConfig", err)
	}
	if _, _, err := IssueNodeCert(caPEM, otherKey, "v1", []Role{RoleVoter}, 30, nil, nil); err == nil {
		t.Error("IssueNodeCert with a CA key that is not the certificate's: got no error")
	}
	_, key2, _ := IssueNodeCert(caPEM, caKey, "v2", []Role{RoleEdge}, 30, nil, nil)
	if _, err := loadPeerTLS(certF, writeTemp(t, dir, "v2-key.pem", key2), ca); !errors.Is(err, ErrBadConfig) {
		t.Errorf("certificate with another node's key: got %v; want ErrBadConfig", err)
	}
}

// TestDerivedCA: two nodes with the same cluster key trust each other's
// certificates; a node with another key does not.
func TestDerivedCA(t *testing.T) {
	key := bytes.Repeat([]byte{7}, ClusterKeySize)
	a, err := derivePeerTLS(key, "a", []Role{RoleVoter}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := derivePeerTLS(key, "b", []Role{RoleEdge}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, err := derivePeerTLS(bytes.Repeat([]byte{8}, ClusterKeySize), "c", []Role{RoleVoter}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	opts := func(p *peerTLS) x509.VerifyOptions {
		return x509.VerifyOptions{Roots: p.pool, DNSName: PeerServerName, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	}
	if _, err := a.cert.Leaf.Verify(opts(b)); err != nil {
		t.Errorf("b does not trust a (same cluster key): %v", err)
	}
	if _, err := a.cert.Leaf.Verify(opts(c)); err == nil {
		t.Error("c trusts a's certificate with another cluster key")
	}
}

func slicesHas(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
