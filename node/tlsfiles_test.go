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
	cert, key, err := IssueNodeCert(caPEM, caKey, "v1", 30, nil, nil)
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

	otherCA := writeTemp(t, dir, "other.pem", otherPEM)
	if _, err := loadPeerTLS(certF, keyF, otherCA); !errors.Is(err, ErrBadConfig) {
		t.Errorf("certificate checked against another CA: got %v; want ErrBadConfig", err)
	}
	if _, _, err := IssueNodeCert(caPEM, otherKey, "v1", 30, nil, nil); err == nil {
		t.Error("IssueNodeCert with a CA key that is not the certificate's: got no error")
	}
	_, key2, _ := IssueNodeCert(caPEM, caKey, "v2", 30, nil, nil)
	if _, err := loadPeerTLS(certF, writeTemp(t, dir, "v2-key.pem", key2), ca); !errors.Is(err, ErrBadConfig) {
		t.Errorf("certificate with another node's key: got %v; want ErrBadConfig", err)
	}
}

// TestDerivedCA: two nodes with the same cluster key trust each other's
// certificates; a node with another key does not.
func TestDerivedCA(t *testing.T) {
	key := bytes.Repeat([]byte{7}, ClusterKeySize)
	a, err := derivePeerTLS(key, "a", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := derivePeerTLS(key, "b", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, err := derivePeerTLS(bytes.Repeat([]byte{8}, ClusterKeySize), "c", t.TempDir())
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
