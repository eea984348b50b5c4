package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
)

// internalTokenOf is the bearer token a node derives from its cluster key
// for the internal endpoints (hex HMAC-SHA256 of "waymark/internal-v1"):
// an attacker who stole the key has it.
func internalTokenOf(t *testing.T, keyFile string) string {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(readKey(t, keyFile))
	if err != nil {
		t.Fatalf("cluster key %s: %v", keyFile, err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("waymark/internal-v1"))
	return hex.EncodeToString(m.Sum(nil))
}

// raftAnswers sends a RequestVote over plain TCP and reports whether the
// node answered it (the raft port took a stranger's RPC).
func raftAnswers(t *testing.T, addr string) bool {
	t.Helper()
	trans, err := hraft.NewTCPTransport("127.0.0.1:0", nil, 1, 3*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer trans.Close()
	var resp hraft.RequestVoteResponse
	err = trans.RequestVote("intruder", hraft.ServerAddress(addr), &hraft.RequestVoteRequest{
		RPCHeader: hraft.RPCHeader{ProtocolVersion: hraft.ProtocolVersionMax, ID: []byte("intruder"), Addr: []byte("127.0.0.1:1")},
		Term:      1,
	}, &resp)
	return err == nil
}

// tlsDialer is a raft stream layer that only dials, over TLS.
type tlsDialer struct {
	net.Listener
	cfg *tls.Config
}

func (d tlsDialer) Dial(addr hraft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(addr), d.cfg)
}

// raftAnswersTLS is raftAnswers over TLS with the given certificate.
func raftAnswersTLS(t *testing.T, addr, certFile, keyFile, caFile string) bool {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := peerClient(t, certFile, keyFile, caFile).Transport.(*http.Transport).TLSClientConfig
	trans := hraft.NewNetworkTransport(tlsDialer{ln, cfg}, 1, 3*time.Second, io.Discard)
	defer trans.Close()
	var resp hraft.RequestVoteResponse
	err = trans.RequestVote("intruder", hraft.ServerAddress(addr), &hraft.RequestVoteRequest{
		RPCHeader: hraft.RPCHeader{ProtocolVersion: hraft.ProtocolVersionMax, ID: []byte("intruder"), Addr: []byte("127.0.0.1:1")},
		Term:      1,
	}, &resp)
	return err == nil
}

// peerClient is an HTTPS client presenting certFile/keyFile and trusting caFile.
func peerClient(t *testing.T, certFile, keyFile, caFile string) *http.Client {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: "node.waymark", MinVersion: tls.VersionTLS13,
	}}}
}

func internalStatus(client *http.Client, url, token string) (int, error) {
	req, _ := http.NewRequest("GET", url+"/internal/v1/status", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestE2ETLSRefusesStrangers: a --dev node, set up with nothing, refuses
// a plain-TCP raft RPC and a plain HTTP call to its internal endpoints
// even with the right cluster token, and refuses HTTPS with a certificate
// of another CA; a client holding the node certificate it generated in
// its data folder gets in.
func TestE2ETLSRefusesStrangers(t *testing.T) {
	dir := t.TempDir()
	p := startNode(t, dir, "--dev", "--http-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0")
	waitFor(t, "ready", 30*time.Second, func() bool { return ready(t, p) })
	token := internalTokenOf(t, filepath.Join(dir, "cluster-key"))

	if raftAnswers(t, p.raft) {
		t.Error("the raft port answered a plain-TCP RequestVote from a stranger; want it refused")
	}
	status, err := internalStatus(http.DefaultClient, "http://"+p.http, token)
	if err != nil || status != http.StatusForbidden {
		t.Errorf("plain HTTP /internal/v1/status with the right token: got %d %v; want 403", status, err)
	}
	// Segment shipping to the aggregator: refused before the body is read.
	if r := do(t, "POST", "http://"+p.http+"/internal/v1/segments", token, "x", "Content-Encoding", "zstd"); r.status != http.StatusForbidden {
		t.Errorf("plain HTTP segment upload with the right token: got %d %s; want 403", r.status, r.body)
	}

	tlsDir := filepath.Join(dir, "tls")
	for _, f := range []string{"waymark-agent-ca.pem", "node.pem", "node-key.pem"} {
		if _, err := os.Stat(filepath.Join(tlsDir, f)); err != nil {
			t.Fatalf("--dev did not write %s: %v", f, err)
		}
	}
	mine := peerClient(t, filepath.Join(tlsDir, "node.pem"), filepath.Join(tlsDir, "node-key.pem"), filepath.Join(tlsDir, "waymark-agent-ca.pem"))
	if status, err := internalStatus(mine, "https://"+p.http, token); err != nil || status != http.StatusOK {
		t.Fatalf("HTTPS with the node's own certificate: got %d %v; want 200", status, err)
	}

	other := t.TempDir()
	for _, args := range [][]string{
		{"tls", "ca", "create", "-dir", other},
		{"tls", "cert", "create", "--node", "rogue", "--role", "voter", "-dir", other, "--ca", filepath.Join(other, "waymark-agent-ca.pem"), "--ca-key", filepath.Join(other, "waymark-agent-ca-key.pem")},
	} {
		if out, errOut, code := runCLI(t, nil, args...); code != 0 {
			t.Fatalf("waymark %v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	// The rogue client trusts the node's CA (so it can talk to it) but
	// presents a certificate of its own CA.
	rogue := peerClient(t, filepath.Join(other, "rogue-node.pem"), filepath.Join(other, "rogue-node-key.pem"), filepath.Join(tlsDir, "waymark-agent-ca.pem"))
	if status, err := internalStatus(rogue, "https://"+p.http, token); err == nil {
		t.Errorf("HTTPS with another CA's certificate: got %d; want the handshake refused", status)
	}
	if !ready(t, p) {
		t.Error("node not ready after the refusals")
	}
}

// TestE2ETLSCluster: a voter and an edge with certificates from `waymark
// tls` replicate and forward writes over mutual TLS; an edge with the
// cluster key but a certificate of another CA joins gossip and is added
// to raft, yet receives no entry and cannot ask the leader for one.
func TestE2ETLSCluster(t *testing.T) {
	pki, other := t.TempDir(), t.TempDir()
	cli := func(args ...string) string {
		t.Helper()
		out, errOut, code := runCLI(t, nil, args...)
		if code != 0 {
			t.Fatalf("waymark %v: exit %d\n%s%s", args, code, out, errOut)
		}
		return out
	}
	cli("tls", "ca", "create", "-dir", pki)
	if _, errOut, code := runCLI(t, nil, "tls", "ca", "create", "-dir", pki); code == 0 || !strings.Contains(errOut, "already exists") {
		t.Errorf("second tls ca create in the same folder: exit %d %q; want a refusal to overwrite", code, errOut)
	}
	ca, caKey := filepath.Join(pki, "waymark-agent-ca.pem"), filepath.Join(pki, "waymark-agent-ca-key.pem")
	// Flags before and after each other, Consul's names.
	cli("tls", "cert", "create", "--node", "v1", "--role", "voter,aggregator", "--ca", ca, "--ca-key", caKey, "-dir", pki)
	cli("tls", "cert", "create", "-dir", pki, "--ca-key", caKey, "--ca", ca, "--node", "e1", "--role", "edge")
	cli("tls", "ca", "create", "-dir", other)
	cli("tls", "cert", "create", "--node", "r1", "--role", "voter", "--ca", filepath.Join(other, "waymark-agent-ca.pem"), "--ca-key", filepath.Join(other, "waymark-agent-ca-key.pem"), "-dir", other)
	if _, errOut, code := runCLI(t, nil, "tls", "cert", "create", "--role", "edge", "--ca", ca, "--ca-key", caKey, "-dir", pki); code != 2 || !strings.Contains(errOut, "--node") {
		t.Errorf("tls cert create without --node: exit %d %q; want 2 and a hint", code, errOut)
	}
	if _, errOut, code := runCLI(t, nil, "tls", "cert", "create", "--node", "x1", "--ca", ca, "--ca-key", caKey, "-dir", pki); code != 2 || !strings.Contains(errOut, "--role") {
		t.Errorf("tls cert create without --role: exit %d %q; want 2 and a hint", code, errOut)
	}
	certFlags := func(dir, name, caFile string) []string {
		return []string{"--tls-cert", filepath.Join(dir, name+"-node.pem"), "--tls-key", filepath.Join(dir, name+"-node-key.pem"), "--tls-ca", caFile}
	}

	c := newCluster(t)
	v1 := c.start("v1", "us", "voter,aggregator", "", append([]string{"--bootstrap-expect", "1"}, certFlags(pki, "v1", ca)...)...)
	e1 := c.start("e1", "us", "edge", v1.gossip, append([]string{"--aggregator-url", "http://" + v1.http}, certFlags(pki, "e1", ca)...)...)
	// The rogue holds the cluster key and a CA and certificate of its own.
	r1 := c.start("r1", "us", "edge", v1.gossip, certFlags(other, "r1", filepath.Join(other, "waymark-agent-ca.pem"))...)
	if !strings.Contains(v1.logs(), "node TLS from files") {
		t.Errorf("v1 did not log that it uses the TLS files:\n%s", v1.logs())
	}
	waitFor(t, "v1 and e1 ready", 60*time.Second, func() bool { return ready(t, v1) && ready(t, e1) })
	waitFor(t, "the rogue edge in the raft configuration", 60*time.Second, func() bool {
		for _, p := range c.peers("v1") {
			if p.ID == "r1" {
				return true
			}
		}
		return false
	})

	key := c.createOwner("v1", "alice")
	// Written through the edge: forwarded to the leader over mutual TLS.
	r := do(t, "POST", "http://"+e1.http+"/v1/links", key, `{"url":"https://dest.example/tls"}`)
	if r.status != 201 {
		t.Fatalf("create through e1: got %d %s\n%s", r.status, r.body, e1.logs())
	}
	code1 := r.json(t)["code"].(string)
	waitFor(t, "the link on e1 and v1", 20*time.Second, func() bool {
		return resolves(t, e1, code1, "https://dest.example/tls") && resolves(t, v1, code1, "https://dest.example/tls")
	})
	// The click e1 recorded ships to the aggregator over mutual TLS, and
	// e1 proxies the link's stats from it the same way.
	waitFor(t, "e1's click at the aggregator", 30*time.Second, func() bool { return eventsCount(t, v1, "--link", code1) >= 1 })
	day := time.Now().UTC().Format(time.DateOnly)
	if r := do(t, "GET", "http://"+e1.http+"/v1/links/"+code1+"/stats?granularity=day&from="+day+"&to="+day+"&tz=UTC", key, ""); r.status != 200 {
		t.Errorf("link stats through e1: %d %s", r.status, r.body)
	}

	// The leader tried to replicate to r1 and refused r1's certificate.
	waitFor(t, "v1 refusing r1's certificate", 30*time.Second, func() bool {
		for _, l := range strings.Split(v1.logs(), "\n") {
			if strings.Contains(l, "failed to appendEntries") && strings.Contains(l, `"ID":"r1"`) && strings.Contains(l, "failed to verify certificate") {
				return true
			}
		}
		return false
	})
	// e1 is a member of the CA, but not a voter: raft on v1 refuses its
	// certificate (a stolen edge cannot pose as a leader or a candidate);
	// v1's own voter certificate is answered.
	if raftAnswersTLS(t, v1.raft, filepath.Join(pki, "e1-node.pem"), filepath.Join(pki, "e1-node-key.pem"), ca) {
		t.Error("v1's raft answered a RequestVote over TLS with the edge's certificate; want it refused")
	}
	if !raftAnswersTLS(t, v1.raft, filepath.Join(pki, "v1-node.pem"), filepath.Join(pki, "v1-node-key.pem"), ca) {
		t.Error("v1's raft refused a RequestVote over TLS with a voter's certificate; want it answered")
	}
	if got := do(t, "GET", "http://"+r1.http+"/"+code1, "", ""); got.status == 302 {
		t.Errorf("the rogue edge redirects %s; want it to hold nothing", code1)
	}
	var st struct {
		AppliedIndex uint64 `json:"applied_index"`
	}
	out, _, code := runCLI(t, c.env("r1"), "status", "--format", "json")
	if code != 0 {
		t.Fatalf("status on r1: exit %d", code)
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.AppliedIndex != 0 {
		t.Errorf("rogue edge applied index: %d (%v); want 0", st.AppliedIndex, err)
	}
}
