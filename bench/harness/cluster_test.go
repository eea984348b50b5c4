package harness

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestClusterOneVoterOneEdge starts a real one-voter cluster with one edge,
// drives creates through the edge, and checks the replica index, the
// codes kept, and that Stop leaves no process behind.
func TestClusterOneVoterOneEdge(t *testing.T) {
	t0 := time.Now()
	bin := BuildWaymark(t)
	t.Logf("built in %v", time.Since(t0))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := StartCluster(ctx, ClusterConfig{
		Binary: bin, Dir: t.TempDir(),
		Members: []ClusterMember{
			{Name: "e1", Region: "eu", Role: RoleEdge}, // listed first: the voter must still seed
			{Name: "v1", Region: "us", Role: RoleVoter},
		},
		NodeArgs:     []string{"--write-rate", "100000", "--create-rate-ip", "0", "--create-rate-key", "0", "--create-rate-domain", "0"},
		StartTimeout: 45 * time.Second,
	})
	if err != nil {
		t.Fatalf("StartCluster: %v", err)
	}
	defer c.Stop()
	t.Logf("started at %v", time.Since(t0))
	nodes := c.Nodes()
	if len(nodes) != 2 || nodes[0].Name != "v1" {
		t.Fatalf("nodes = %v; want v1 first, then e1", nodes)
	}
	for _, n := range nodes {
		if n.HTTPAddr == "" || n.AdminAddr == "" || n.GossipAddr == "" || n.RaftAddr == "" || n.OperatorToken == "" {
			t.Errorf("%s: http %q admin %q gossip %q raft %q token %q; want all set", n.Name, n.HTTPAddr, n.AdminAddr, n.GossipAddr, n.RaftAddr, n.OperatorToken)
		}
	}
	leader, err := c.Leader(ctx)
	if err != nil || leader.Name != "v1" {
		t.Fatalf("Leader = %v, %v; want v1", leader, err)
	}
	edge := c.Node("e1")
	keys, err := c.CreateOwners(ctx, edge, "test", 2)
	if err != nil {
		t.Fatalf("CreateOwners: %v", err)
	}

	res, err := RunCreates(ctx, CreateLoadConfig{
		Addr: edge.HTTPAddr, APIKeys: keys, Conns: 4, Count: 40, Duration: 20 * time.Second, KeepEvery: 1,
	})
	if err != nil {
		t.Fatalf("RunCreates: %v", err)
	}
	if res.Created < 40 || res.Errors() != 0 {
		t.Fatalf("got %d created, %d errors (%s, %v); want >= 40 and 0", res.Created, res.Errors(), res.FirstError, res.Statuses)
	}
	if uint64(len(res.Codes)) != res.Created {
		t.Errorf("kept %d codes; want one per create (%d)", len(res.Codes), res.Created)
	}

	// The edge's replica catches up with the leader's and the kept codes
	// resolve there.
	lead, err := c.Replica(ctx, leader)
	if err != nil {
		t.Fatalf("Replica(v1): %v", err)
	}
	for {
		rep, err := c.Replica(ctx, edge)
		if err != nil {
			t.Fatalf("Replica(e1): %v", err)
		}
		if rep.AppliedIndex >= lead.AppliedIndex && rep.AppliedIndex > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("edge replica at %d; want >= %d", rep.AppliedIndex, lead.AppliedIndex)
		}
		time.Sleep(pollInterval)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, code := range res.Codes {
		resp, err := client.Get(edge.BaseURL + "/" + code)
		if err != nil {
			t.Fatalf("GET /%s: %v", code, err)
		}
		resp.Body.Close()
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, "https://example.com/c/") {
			t.Errorf("GET /%s on e1: got %d Location %q; want 302 to a bench URL", code, resp.StatusCode, loc)
		}
	}

	t.Logf("stopping at %v", time.Since(t0))
	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	t.Logf("stopped at %v", time.Since(t0))
	for _, n := range nodes {
		select {
		case <-n.Exited():
		default:
			t.Errorf("%s still running after Stop", n.Name)
		}
		if err := syscall.Kill(-n.Pid(), 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("signal 0 to group of %s after Stop: got %v; want ESRCH", n.Name, err)
		}
	}
}

func TestStartClusterNeedsAVoter(t *testing.T) {
	_, err := StartCluster(context.Background(), ClusterConfig{
		Binary: "/nonexistent", Dir: t.TempDir(),
		Members: []ClusterMember{{Name: "e1", Region: "eu", Role: RoleEdge}},
	})
	if err == nil || !strings.Contains(err.Error(), "no voter") {
		t.Errorf("StartCluster without a voter: got %v; want a 'no voter' error", err)
	}
}

func TestDeriveInternalToken(t *testing.T) {
	key := "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=" // 32 zero bytes
	a, err := DeriveInternalToken(key)
	if err != nil {
		t.Fatalf("DeriveInternalToken: %v", err)
	}
	if b, _ := DeriveInternalToken(" " + key + "\n"); b != a {
		t.Errorf("surrounding space changed the token: %q vs %q", b, a)
	}
	if len(a) != 64 {
		t.Errorf("token %q has %d hex digits; want 64", a, len(a))
	}
	for _, bad := range []string{"", "not base64!", "AAAA"} {
		if _, err := DeriveInternalToken(bad); err == nil {
			t.Errorf("DeriveInternalToken(%q) succeeded; want an error", bad)
		}
	}
}
