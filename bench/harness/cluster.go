package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Messages with which a cluster node logs its other bound addresses (the
// public one is NodeListeningMsg).
const (
	AdminListeningMsg  = "admin listening"
	GossipListeningMsg = "gossip listening"
	RaftListeningMsg   = "raft listening"
)

// Roles a cluster member can have.
const (
	RoleVoter = "voter"
	RoleEdge  = "edge"
)

// ClusterMember describes one node of a cluster.
type ClusterMember struct {
	Name   string   // unique in the cluster; also its raft ID
	Region string   // e.g. "us"
	Role   string   // RoleVoter or RoleEdge
	Args   []string // extra flags for this node only
}

// ClusterConfig describes a multi-process cluster on loopback.
type ClusterConfig struct {
	Binary string // the waymark binary
	// Dir holds the cluster key and one data folder per node. It must exist
	// and belongs to the caller, who removes it after Stop.
	Dir string
	// Members are started in order; the first voter is the gossip seed that
	// every other node joins. Voters wait for all the voters listed here
	// before bootstrapping.
	Members      []ClusterMember
	NodeArgs     []string      // extra flags for every node, e.g. --write-rate
	Echo         io.Writer     // optional copy of every node's log
	StartTimeout time.Duration // per node for its addresses, and for the cluster to form; zero means 90 s
}

// ClusterNode is one running node of a Cluster.
type ClusterNode struct {
	*Child
	ClusterMember
	DataDir    string
	HTTPAddr   string // public address, host:port
	BaseURL    string // "http://" + HTTPAddr
	AdminAddr  string
	GossipAddr string
	RaftAddr   string
	// OperatorToken authenticates the admin API of this node only.
	OperatorToken string
	StartedAt     time.Time // when the process was started
}

// Cluster is a set of real waymark processes sharing a cluster key, all on
// 127.0.0.1 with ports chosen by the kernel.
type Cluster struct {
	cfg     ClusterConfig
	KeyFile string
	// InternalToken is the bearer token nodes present to each other; the
	// harness uses it to read a node's replica index (see ReplicaStatus).
	InternalToken string

	client     *http.Client
	peerMu     sync.Mutex
	peerClient *http.Client // mutual TLS, for internal endpoints (peer)
	mu         sync.Mutex
	nodes      []*ClusterNode
	seed       string // gossip address every later node joins
	nVoters    int
	stopOnce   sync.Once
}

// StartCluster writes a cluster key, starts every member, and waits until
// the raft configuration holds every voter and every edge and each node
// answers /readyz with 200. On error every started node is already
// stopped.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 90 * time.Second
	}
	c := &Cluster{cfg: cfg, client: newAdminClient()}
	for _, m := range cfg.Members {
		if m.Role == RoleVoter {
			c.nVoters++
		}
	}
	if c.nVoters == 0 {
		return nil, errors.New("cannot start cluster: no voter among the members")
	}
	if err := c.writeKey(ctx); err != nil {
		return nil, err
	}
	// The first voter goes first: it is the seed the others join.
	order := slices.Clone(cfg.Members)
	seed := slices.IndexFunc(order, func(m ClusterMember) bool { return m.Role == RoleVoter })
	order = slices.Insert(slices.Delete(order, seed, seed+1), 0, cfg.Members[seed])
	for _, m := range order {
		if _, err := c.StartNode(ctx, m); err != nil {
			c.Stop()
			return nil, err
		}
	}
	waitCtx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	if err := c.WaitFormed(waitCtx); err != nil {
		c.Stop()
		return nil, err
	}
	if err := c.claimRegions(waitCtx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// claimRegions gives every member's region its slot of the code space
// with `waymark regions add`, as an operator does for a region that no
// founding voter is in; a region that has one keeps it.
func (c *Cluster) claimRegions(ctx context.Context) error {
	var regions []string
	for _, m := range c.cfg.Members {
		if !slices.Contains(regions, m.Region) {
			regions = append(regions, m.Region)
		}
	}
	via := c.Nodes()[0] // the seed voter
	cmd := exec.CommandContext(ctx, c.cfg.Binary, append([]string{"regions", "add"}, regions...)...)
	cmd.Env = append(os.Environ(), "WAYMARK_ADMIN_ADDR="+via.AdminAddr, "WAYMARK_TOKEN="+via.OperatorToken)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("cannot claim regions %v through %s: %w: %s", regions, via.Name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (c *Cluster) writeKey(ctx context.Context) error {
	c.KeyFile = filepath.Join(c.cfg.Dir, "cluster-key")
	token, err := WriteClusterKey(ctx, c.cfg.Binary, c.KeyFile)
	if err != nil {
		return err
	}
	c.InternalToken = token
	return nil
}

// WriteClusterKey makes a cluster key with `waymark keygen`, writes it to
// path (for --cluster-key-file) and returns the internal token that nodes
// holding it accept, which is also their segment ship token.
func WriteClusterKey(ctx context.Context, binary, path string) (string, error) {
	cmd := exec.CommandContext(ctx, binary, "keygen")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("cannot run %s keygen: %w: %s", binary, err, strings.TrimSpace(stderr.String()))
	}
	key := strings.TrimSpace(string(out))
	token, err := DeriveInternalToken(key)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("cannot write cluster key: %w", err)
	}
	return token, nil
}

// StartNode starts one more node that joins the cluster by gossip, and
// waits only until it has logged its four addresses and written its
// operator token: whether and when it catches up is for the caller to
// watch. On error the node is already stopped.
func (c *Cluster) StartNode(ctx context.Context, m ClusterMember) (*ClusterNode, error) {
	if m.Role != RoleVoter && m.Role != RoleEdge {
		return nil, fmt.Errorf("cannot start %s: role %q is neither %q nor %q", m.Name, m.Role, RoleVoter, RoleEdge)
	}
	dataDir := filepath.Join(c.cfg.Dir, m.Name)
	args := []string{"node",
		"--name", m.Name, "--region", m.Region, "--role", m.Role,
		"--cluster-key-file", c.KeyFile, "--data-dir", dataDir,
		"--http-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0",
		"--raft-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0",
		"--log-format", "json",
	}
	if m.Role == RoleVoter {
		args = append(args, "--bootstrap-expect", fmt.Sprint(c.nVoters))
	}
	c.mu.Lock()
	seed := c.seed
	c.mu.Unlock()
	if seed != "" {
		args = append(args, "--join", seed)
	}
	args = append(append(args, c.cfg.NodeArgs...), m.Args...)
	started := time.Now()
	child, err := StartChild(ChildConfig{
		Name: m.Name, Path: c.cfg.Binary, Args: args, Echo: c.cfg.Echo,
		StopGrace: 10 * time.Second, // time to flush Pebble and close raft
	})
	if err != nil {
		return nil, err
	}
	n := &ClusterNode{Child: child, ClusterMember: m, DataDir: dataDir, StartedAt: started}
	if err := c.waitAddrs(ctx, n); err != nil {
		child.Stop()
		return nil, err
	}
	c.mu.Lock()
	c.nodes = append(c.nodes, n)
	if c.seed == "" {
		c.seed = n.GossipAddr
	}
	c.mu.Unlock()
	return n, nil
}

func (c *Cluster) waitAddrs(ctx context.Context, n *ClusterNode) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	defer cancel()
	ctx, cancelExit := context.WithCancelCause(ctx)
	defer cancelExit(nil)
	go func() {
		select {
		case <-n.Exited():
			cancelExit(fmt.Errorf("%s exited (%v)%s", n.Name, n.ExitErr(), n.tailNote()))
		case <-ctx.Done():
		}
	}()
	for _, a := range []struct {
		msg string
		dst *string
	}{{RaftListeningMsg, &n.RaftAddr}, {GossipListeningMsg, &n.GossipAddr}, {AdminListeningMsg, &n.AdminAddr}, {NodeListeningMsg, &n.HTTPAddr}} {
		addr, err := n.WaitForAddr(ctx, a.msg)
		if err != nil {
			return err
		}
		*a.dst = addr
	}
	n.BaseURL = "http://" + n.HTTPAddr
	token, err := WaitFileContent(ctx, filepath.Join(n.DataDir, "operator-token"))
	if err != nil {
		return fmt.Errorf("cannot get the operator token of %s: %w", n.Name, err)
	}
	n.OperatorToken = token
	return nil
}

// Nodes returns the running nodes in start order.
func (c *Cluster) Nodes() []*ClusterNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*ClusterNode(nil), c.nodes...)
}

// Node returns the node called name, or nil.
func (c *Cluster) Node(name string) *ClusterNode {
	for _, n := range c.Nodes() {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// WaitFormed waits until the raft configuration, as the seed sees it,
// holds every started voter as a voter and every started edge as a
// non-voter, and every node answers /readyz with 200.
func (c *Cluster) WaitFormed(ctx context.Context) error {
	nodes := c.Nodes()
	wantVoters, wantEdges := 0, 0
	for _, n := range nodes {
		if n.Role == RoleVoter {
			wantVoters++
		} else {
			wantEdges++
		}
	}
	var last string
	for {
		if err := c.CheckAlive(); err != nil {
			return err
		}
		peers, err := c.Peers(ctx, nodes[0])
		voters, edges := 0, 0
		for _, p := range peers {
			if p.Suffrage == RoleVoter {
				voters++
			} else {
				edges++
			}
		}
		switch {
		case err != nil:
			last = err.Error()
		case voters != wantVoters || edges != wantEdges:
			last = fmt.Sprintf("raft has %d voters and %d non-voters; want %d and %d", voters, edges, wantVoters, wantEdges)
		default:
			last = ""
			for _, n := range nodes {
				if !c.ready(ctx, n) {
					last = n.Name + " is not ready"
					break
				}
			}
			if last == "" {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cannot see the cluster formed (%s): %w", last, context.Cause(ctx))
		case <-time.After(pollInterval):
		}
	}
}

func (c *Cluster) ready(ctx context.Context, n *ClusterNode) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.BaseURL+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// CheckAlive returns an error naming the first node that exited, with its
// last log lines.
func (c *Cluster) CheckAlive() error {
	for _, n := range c.Nodes() {
		select {
		case <-n.Exited():
			return fmt.Errorf("node %s exited (%v)%s", n.Name, n.ExitErr(), n.tailNote())
		default:
		}
	}
	return nil
}

// Stop stops every node, all at once (each gets SIGTERM, then SIGKILL
// after its grace period). It is safe to call more than once.
func (c *Cluster) Stop() error {
	var errs []error
	c.stopOnce.Do(func() {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, n := range c.Nodes() {
			wg.Go(func() {
				if err := n.Stop(); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		c.client.CloseIdleConnections()
	})
	return errors.Join(errs...)
}

// CreateOwners makes count owners with `waymark owners create NAME`
// through the admin API of via, and returns their API keys.
func (c *Cluster) CreateOwners(ctx context.Context, via *ClusterNode, prefix string, count int) ([]string, error) {
	keys := make([]string, 0, count)
	for i := range count {
		name := fmt.Sprintf("%s-%d", prefix, i)
		cmd := exec.CommandContext(ctx, c.cfg.Binary, "owners", "create", name)
		cmd.Env = append(os.Environ(), "WAYMARK_ADMIN_ADDR="+via.AdminAddr, "WAYMARK_TOKEN="+via.OperatorToken)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("cannot create owner %s through %s: %w: %s", name, via.Name, err, strings.TrimSpace(stderr.String()))
		}
		key := strings.TrimSpace(string(out))
		if key == "" || strings.ContainsAny(key, " \n") {
			return nil, fmt.Errorf("cannot create owner %s: want one API key on stdout, got %q", name, out)
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// NodeStatus is the part of the admin API's GET /v1/status the harness
// reads.
type NodeStatus struct {
	Name         string `json:"name"`
	Region       string `json:"region"`
	RaftState    string `json:"raft_state"`
	Leader       string `json:"leader"`
	AppliedIndex uint64 `json:"applied_index"` // raft's, no-op entries included
	CommitIndex  uint64 `json:"commit_index"`
	Ready        bool   `json:"ready"`
	ReadyDetail  string `json:"ready_detail"`
}

// Status asks n's admin API for its status.
func (c *Cluster) Status(ctx context.Context, n *ClusterNode) (NodeStatus, error) {
	var st NodeStatus
	err := c.getJSON(ctx, "http://"+n.AdminAddr+"/v1/status", n.OperatorToken, &st)
	return st, err
}

// RaftPeer is one row of the admin API's GET /v1/raft/peers.
type RaftPeer struct {
	ID       string `json:"id"`
	Suffrage string `json:"suffrage"` // "voter" or "nonvoter"
	Leader   bool   `json:"leader"`
	Applied  int64  `json:"applied_index"`
}

// Peers asks via for the raft configuration.
func (c *Cluster) Peers(ctx context.Context, via *ClusterNode) ([]RaftPeer, error) {
	var peers []RaftPeer
	err := c.getJSON(ctx, "http://"+via.AdminAddr+"/v1/raft/peers", via.OperatorToken, &peers)
	return peers, err
}

// ReplicaStatus is what a node's internal status endpoint says about its
// replica.
type ReplicaStatus struct {
	Name string `json:"name"`
	// AppliedIndex is the last log entry whose effects are in the node's
	// Pebble replica: every link created at or below it resolves locally.
	AppliedIndex uint64 `json:"applied_index"`
	CommitIndex  uint64 `json:"commit_index"`
	Ready        bool   `json:"ready"`
}

// internalStatusPath is the node-to-node status endpoint on the public
// port, authenticated by the cluster's internal token.
const internalStatusPath = "/internal/v1/status"

// Replica asks n how far its local replica has applied the log. Unlike
// Status, which reports raft's applied index (handed to the state machine,
// not necessarily in Pebble yet), this is the index a local redirect sees.
func (c *Cluster) Replica(ctx context.Context, n *ClusterNode) (ReplicaStatus, error) {
	var st ReplicaStatus
	peer, err := c.peer(n)
	if err != nil {
		return st, err
	}
	err = getJSONWith(ctx, peer, PeerURL(n.BaseURL)+internalStatusPath, c.InternalToken, &st)
	return st, err
}

// peer is the mutual-TLS client for internal endpoints, as the first node
// asked about (every node's certificate is of the same derived CA).
func (c *Cluster) peer(n *ClusterNode) (*http.Client, error) {
	c.peerMu.Lock()
	defer c.peerMu.Unlock()
	if c.peerClient == nil {
		pc, err := PeerClient(n.DataDir, 10*time.Second)
		if err != nil {
			return nil, err
		}
		c.peerClient = pc
	}
	return c.peerClient, nil
}

// Leader asks the nodes, in order, who leads, until one knows; ctx bounds
// the wait.
func (c *Cluster) Leader(ctx context.Context) (*ClusterNode, error) {
	var last string
	for {
		for _, n := range c.Nodes() {
			st, err := c.Status(ctx, n)
			if err != nil {
				last = err.Error()
				continue
			}
			if l := c.Node(st.Leader); l != nil {
				return l, nil
			}
			last = fmt.Sprintf("%s knows no running leader (%q)", n.Name, st.Leader)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("cannot find the leader (%s): %w", last, context.Cause(ctx))
		case <-time.After(pollInterval):
		}
	}
}

func (c *Cluster) getJSON(ctx context.Context, url, token string, v any) error {
	return getJSONWith(ctx, c.client, url, token, v)
}

func getJSONWith(ctx context.Context, client *http.Client, url, token string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("cannot build request for %s: %w", url, err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("cannot get %s: %w", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("cannot read %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("cannot get %s: status %d: %s", url, resp.StatusCode, truncate(b, 300))
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("cannot decode %s: %w", url, err)
	}
	return nil
}

// newAdminClient keeps a few connections per node open, so tight status
// polling does not churn loopback ports.
func newAdminClient() *http.Client {
	return &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: time.Minute},
	}
}
