package node

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Node-to-node TLS: one cluster CA signs a certificate per node; Raft and
// the internal HTTP endpoints accept only TLS 1.3 peers that present one
// (README.md, "Security between nodes").

// PeerServerName is the DNS name every node certificate carries and every
// node verifies when it dials another: nodes are dialled by IP, so the
// name says "a node of this cluster", and the CA says which cluster.
const PeerServerName = "node.waymark"

// Files `waymark tls` writes, named like Consul's.
const (
	TLSCAFile    = "waymark-agent-ca.pem"
	TLSCAKeyFile = "waymark-agent-ca-key.pem"
	tlsDirName   = "tls" // inside the data folder, for derived certificates
)

// NodeCertFile and NodeKeyFile name a node's certificate and key.
func NodeCertFile(node string) string { return node + "-node.pem" }
func NodeKeyFile(node string) string  { return node + "-node-key.pem" }

// certAuthority is a CA certificate and its signing key.
type certAuthority struct {
	cert *x509.Certificate
	der  []byte
	key  crypto.Signer
}

// newCA makes a self-signed CA valid for years.
func newCA(key crypto.Signer, serial *big.Int, notBefore time.Time, years int) (*certAuthority, error) {
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "Waymark cluster CA", Organization: []string{"Waymark"}},
		NotBefore:             notBefore,
		NotAfter:              notBefore.AddDate(years, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("cannot create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("cannot parse CA certificate: %w", err)
	}
	return &certAuthority{cert: cert, der: der, key: key}, nil
}

// NewCA makes a fresh cluster CA with a random P-256 key, valid 10 years.
func NewCA() (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	ca, err := newCA(key, randomSerial(), time.Now().Add(-time.Minute), 10)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pemBlock("CERTIFICATE", ca.der), keyPEM, nil
}

// derivedCA is the cluster CA of a cluster that was given no --tls-*
// files: its Ed25519 key comes from the cluster key, so every node holding
// that key derives the same CA and can sign its own certificate. Fixed
// serial and dates make the certificate itself identical everywhere.
func derivedCA(clusterKey []byte) (*certAuthority, error) {
	seed, err := hkdf.Key(sha256.New, clusterKey, nil, "waymark/tls-ca-v1", ed25519.SeedSize)
	if err != nil {
		return nil, fmt.Errorf("cannot derive the cluster CA: %w", err)
	}
	key := ed25519.NewKeyFromSeed(seed)
	return newCA(key, big.NewInt(1), time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), 100)
}

// issue signs a certificate for one node, usable as TLS server and client,
// valid for days. The node's roles go in the subject's organizational
// units: raft accepts connections only from a certificate with the voter
// role (edges never open one). Extra DNS names and IPs are added to the
// defaults (PeerServerName, the node name, localhost and the loopback
// addresses).
func (ca *certAuthority) issue(node string, roles []Role, days int, dnsNames []string, ips []net.IP) (certDER []byte, key *ecdsa.PrivateKey, err error) {
	ous := make([]string, len(roles))
	for i, r := range roles {
		ous[i] = string(r)
	}
	key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      pkix.Name{CommonName: node, Organization: []string{"Waymark"}, OrganizationalUnit: ous},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.AddDate(0, 0, days),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     append([]string{PeerServerName, node, "localhost"}, dnsNames...),
		IPAddresses:  append([]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, ips...),
	}
	if ca.cert.NotAfter.Before(tmpl.NotAfter) {
		tmpl.NotAfter = ca.cert.NotAfter
	}
	certDER, err = x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot sign the certificate of %q: %w", node, err)
	}
	return certDER, key, nil
}

// IssueNodeCert signs a node certificate with the CA in caCertPEM and
// caKeyPEM.
func IssueNodeCert(caCertPEM, caKeyPEM []byte, node string, roles []Role, days int, dnsNames []string, ips []net.IP) (certPEM, keyPEM []byte, err error) {
	caCert, err := parseCertPEM(caCertPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read the CA certificate: %w", err)
	}
	caKey, err := parseKeyPEM(caKeyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read the CA key: %w", err)
	}
	if !publicKeysEqual(caCert.PublicKey, caKey.Public()) {
		return nil, nil, errors.New("the CA key does not belong to the CA certificate")
	}
	ca := &certAuthority{cert: caCert, der: caCert.Raw, key: caKey}
	der, key, err := ca.issue(node, roles, days, dnsNames, ips)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pemBlock("CERTIFICATE", der), keyPEM, nil
}

// peerTLS is this node's TLS material: its certificate and the CA pool it
// trusts, as server and as client.
type peerTLS struct {
	cert tls.Certificate
	pool *x509.CertPool
	// derived is true when the CA comes from the cluster key.
	derived bool
}

// loadPeerTLS reads --tls-cert/--tls-key/--tls-ca, and checks the
// certificate is one the CA signed for node-to-node use.
func loadPeerTLS(certFile, keyFile, caFile string) (*peerTLS, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot load --tls-cert %q and --tls-key %q: %w", ErrBadConfig, certFile, keyFile, err)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot read --tls-ca: %w", ErrBadConfig, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%w: --tls-ca %q holds no PEM certificate", ErrBadConfig, caFile)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("%w: --tls-cert %q: %w", ErrBadConfig, certFile, err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{
		DNSName: PeerServerName, Roots: pool,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return nil, fmt.Errorf("%w: --tls-cert %q is not a node certificate of --tls-ca %q (make one with `waymark tls cert create`): %w", ErrBadConfig, certFile, caFile, err)
	}
	cert.Leaf = leaf
	return &peerTLS{cert: cert, pool: pool}, nil
}

// derivePeerTLS builds the CA from the cluster key and signs a fresh
// certificate for this node. The CA certificate and this node's
// certificate and key are written to DATA_DIR/tls for curl and inspection;
// nothing reads them back.
func derivePeerTLS(clusterKey []byte, node string, roles []Role, dataDir string) (*peerTLS, error) {
	ca, err := derivedCA(clusterKey)
	if err != nil {
		return nil, err
	}
	der, key, err := ca.issue(node, roles, 365, nil, nil)
	if err != nil {
		return nil, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	certPEM := pemBlock("CERTIFICATE", der)
	dir := filepath.Join(dataDir, tlsDirName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cannot create %q: %w", dir, err)
	}
	for name, data := range map[string][]byte{TLSCAFile: pemBlock("CERTIFICATE", ca.der), "node.pem": certPEM, "node-key.pem": keyPEM} {
		if err := writeFileAtomic(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("BUG: a certificate just made does not load: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return &peerTLS{cert: cert, pool: pool, derived: true}, nil
}

// certHasRole reports whether a node certificate carries role r.
func certHasRole(leaf *x509.Certificate, r Role) bool {
	for _, ou := range leaf.Subject.OrganizationalUnit {
		if ou == string(r) {
			return true
		}
	}
	return false
}

// checkIdentity refuses a certificate made for another node, or one that
// lacks the voter role on a voter (the other voters would refuse its raft
// connections).
func (p *peerTLS) checkIdentity(name string, roles []Role) error {
	leaf := p.cert.Leaf
	if leaf.Subject.CommonName != name {
		return fmt.Errorf("%w: --tls-cert is the certificate of node %q; this node is --name %q", ErrBadConfig, leaf.Subject.CommonName, name)
	}
	for _, r := range roles {
		if r == RoleVoter && !certHasRole(leaf, RoleVoter) {
			return fmt.Errorf("%w: --tls-cert has roles %q, not voter: other voters would refuse this node's raft connections (make it with `waymark tls cert create --role voter`)", ErrBadConfig, leaf.Subject.OrganizationalUnit)
		}
	}
	return nil
}

// raftInbound is raft's check of an accepted peer: only voters open raft
// connections (leaders replicate, candidates ask for votes), so a
// certificate without the voter role, such as a stolen edge's, is refused.
func raftInbound(leaf *x509.Certificate) error {
	if !certHasRole(leaf, RoleVoter) {
		return fmt.Errorf("raft peer %q has roles %q, not voter: only voters open raft connections", leaf.Subject.CommonName, leaf.Subject.OrganizationalUnit)
	}
	return nil
}

// serverConfig accepts only TLS 1.3 clients with a certificate of the CA.
func (p *peerTLS) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{p.cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    p.pool,
	}
}

// clientConfig dials peers: it presents this node's certificate and
// accepts only a server certificate of the CA for PeerServerName.
func (p *peerTLS) clientConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{p.cert},
		RootCAs:      p.pool,
		ServerName:   PeerServerName,
	}
}

// raftConfig is one config for both sides of the Raft transport.
func (p *peerTLS) raftConfig() *tls.Config {
	c := p.serverConfig()
	c.RootCAs = p.pool
	c.ServerName = PeerServerName
	return c
}

func randomSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic("BUG: crypto/rand failed: " + err.Error())
	}
	return n.Add(n, big.NewInt(1))
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("cannot encode private key: %w", err)
	}
	return pemBlock("PRIVATE KEY", der), nil
}

func parseCertPEM(b []byte) (*x509.Certificate, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM CERTIFICATE block")
	}
	return x509.ParseCertificate(blk.Bytes)
}

func parseKeyPEM(b []byte) (crypto.Signer, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("no PEM block")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		if ek, err2 := x509.ParseECPrivateKey(blk.Bytes); err2 == nil {
			return ek, nil
		}
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("unsupported key type %T", k)
	}
	return s, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	e, ok := a.(equaler)
	return ok && e.Equal(b)
}
