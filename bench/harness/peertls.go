package harness

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Nodes answer their internal endpoints (status, segment shipping) only
// over mutual TLS with a certificate of the cluster CA. A node started
// without --tls-* files writes the CA and its own certificate and key to
// DATA_DIR/tls (README.md, "Security between nodes"); the harness calls
// as that node.

// PeerClient is an HTTPS client that presents the certificate of the node
// whose data folder is dataDir.
func PeerClient(dataDir string, timeout time.Duration) (*http.Client, error) {
	dir := filepath.Join(dataDir, "tls")
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "node.pem"), filepath.Join(dir, "node-key.pem"))
	if err != nil {
		return nil, fmt.Errorf("cannot load the node certificate in %s: %w", dir, err)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, "waymark-agent-ca.pem"))
	if err != nil {
		return nil, fmt.Errorf("cannot read the cluster CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no certificate in %s/waymark-agent-ca.pem", dir)
	}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		MaxIdleConnsPerHost: 16,
		TLSClientConfig: &tls.Config{
			MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: "node.waymark",
		},
	}}, nil
}

// PeerURL is a node's base URL as other nodes call it: https on the same
// port.
func PeerURL(base string) string {
	if rest, ok := strings.CutPrefix(base, "http://"); ok {
		return "https://" + rest
	}
	return base
}
