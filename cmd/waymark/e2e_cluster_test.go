package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// cluster is a set of real waymark processes sharing a cluster key.
type cluster struct {
	t       *testing.T
	keyFile string
	nodes   map[string]*proc
	args    map[string][]string
}

func newCluster(t *testing.T) *cluster {
	out, _, code := runCLI(t, nil, "keygen")
	if code != 0 {
		t.Fatal("keygen failed")
	}
	keyFile := filepath.Join(t.TempDir(), "cluster-key")
	if err := os.WriteFile(keyFile, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	return &cluster{t: t, keyFile: keyFile, nodes: map[string]*proc{}, args: map[string][]string{}}
}

// voterAndEdge starts a one-voter cluster's voter v1 (region us) and an
// edge e1 in edgeRegion, waits until both are ready, and creates the
// owner named owner through the CLI, returning its API key.
func (c *cluster) voterAndEdge(edgeRegion, owner string) (v1, e1 *proc, key string) {
	t := c.t
	t.Helper()
	v1 = c.start("v1", "us", "voter", "", "--bootstrap-expect", "1")
	e1 = c.start("e1", edgeRegion, "edge", v1.gossip)
	waitFor(t, "v1 and e1 ready", 60*time.Second, func() bool { return ready(t, v1) && ready(t, e1) })
	out, _, code := runCLI(t, c.env("v1"), "owners", "create", owner)
	key = strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(key, "wm_") {
		t.Fatalf("owners create %s: exit %d %q", owner, code, key)
	}
	return v1, e1, key
}

// threeVotersAndEdge starts voters v1 (us, also the aggregator), v2 (eu)
// and v3 (ap), each with voterArgs, and an edge e1 (eu) that ships to v1,
// with edgeArgs, and waits until raft holds the three voters and the non-voter and every
// node is ready. It returns the four names.
func (c *cluster) threeVotersAndEdge(voterArgs []string, edgeArgs ...string) []string {
	t := c.t
	t.Helper()
	voterArgs = append([]string{"--bootstrap-expect", "3"}, voterArgs...)
	v1 := c.start("v1", "us", "voter,aggregator", "", voterArgs...)
	c.start("v2", "eu", "voter", v1.gossip, voterArgs...)
	c.start("v3", "ap", "voter", v1.gossip, voterArgs...)
	c.start("e1", "eu", "edge", v1.gossip, append([]string{"--aggregator-url", "http://" + v1.http}, edgeArgs...)...)
	names := []string{"v1", "v2", "v3", "e1"}
	waitFor(t, "3 voters and 1 non-voter in raft", 60*time.Second, func() bool {
		voters, non := 0, 0
		for _, r := range c.peers("v1") {
			if r.Suffrage == "voter" {
				voters++
			} else {
				non++
			}
		}
		return voters == 3 && non == 1
	})
	waitFor(t, "every node ready", 60*time.Second, func() bool {
		for _, n := range names {
			if !ready(t, c.nodes[n]) {
				return false
			}
		}
		return true
	})
	return names
}

// start launches a node; join is a gossip address or "".
func (c *cluster) start(name, region, role, join string, extra ...string) *proc {
	c.t.Helper()
	args := []string{"--name", name, "--region", region, "--role", role, "--cluster-key-file", c.keyFile,
		"--http-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0"}
	if join != "" {
		args = append(args, "--join", join)
	}
	args = append(args, extra...)
	dir := filepath.Join(c.t.TempDir(), name)
	c.args[name] = args
	p := startNode(c.t, dir, args...)
	c.nodes[name] = p
	return p
}

// restart starts a stopped node again on its data folder and ports.
func (c *cluster) restart(name string) *proc {
	c.t.Helper()
	old := c.nodes[name]
	args := append([]string(nil), c.args[name]...)
	for i := range args {
		switch args[i] {
		case "--http-addr":
			args[i+1] = old.http
		case "--admin-addr":
			args[i+1] = old.admin
		case "--raft-addr":
			args[i+1] = old.raft
		case "--gossip-addr":
			args[i+1] = old.gossip
		}
	}
	p := startNode(c.t, old.dataDir, args...)
	c.nodes[name] = p
	return p
}

// createOwner makes an owner through node's operator CLI and returns its
// API key.
func (c *cluster) createOwner(node, name string) string {
	c.t.Helper()
	out, _, code := runCLI(c.t, c.env(node), "owners", "create", name)
	key := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(key, "wm_") {
		c.t.Fatalf("owners create %s through %s: exit %d %q", name, node, code, key)
	}
	return key
}

func (c *cluster) env(name string) []string {
	p := c.nodes[name]
	return []string{"WAYMARK_ADMIN_ADDR=" + p.admin, "WAYMARK_TOKEN=" + readKey(c.t, filepath.Join(p.dataDir, "operator-token"))}
}

type peerRow struct {
	ID       string `json:"id"`
	Suffrage string `json:"suffrage"`
	Leader   bool   `json:"leader"`
	Applied  int64  `json:"applied_index"`
}

func (c *cluster) peers(via string) []peerRow {
	out, _, code := runCLI(c.t, c.env(via), "raft", "peers", "-format", "json")
	if code != 0 {
		return nil
	}
	var rows []peerRow
	json.Unmarshal([]byte(out), &rows)
	return rows
}

func (c *cluster) leader(via string) string {
	for _, p := range c.peers(via) {
		if p.Leader {
			return p.ID
		}
	}
	return ""
}

func ready(t *testing.T, p *proc) bool {
	return do(t, "GET", "http://"+p.http+"/readyz", "", "").status == 200
}

// resolves reports whether code redirects to dest on p.
func resolves(t *testing.T, p *proc, code, dest string) bool {
	r := do(t, "GET", "http://"+p.http+"/"+code, "", "")
	return r.status == 302 && r.header.Get("Location") == dest
}

// TestE2ECluster forms a three-voter, two-edge cluster from gossip alone and
// drives it through creates from an edge, takedown, a leader SIGKILL in the
// middle of a stream of creates, a paused edge, paused voters, peer removal,
// a graceful leave and every operator command.
func TestE2ECluster(t *testing.T) {
	c := newCluster(t)
	v1 := c.start("v1", "us", "voter", "", "--bootstrap-expect", "3")
	c.start("v2", "eu", "voter", v1.gossip, "--bootstrap-expect", "3")
	c.start("v3", "ap", "voter", v1.gossip, "--bootstrap-expect", "3")
	c.start("e1", "eu", "edge", v1.gossip)
	c.start("e2", "ap", "edge", v1.gossip)
	all := []string{"v1", "v2", "v3", "e1", "e2"}

	waitFor(t, "3 voters and 2 non-voters in raft", 60*time.Second, func() bool {
		rows := c.peers("v1")
		voters, non := 0, 0
		for _, r := range rows {
			if r.Suffrage == "voter" {
				voters++
			} else {
				non++
			}
		}
		return voters == 3 && non == 2
	})
	waitFor(t, "every node ready", 30*time.Second, func() bool {
		for _, n := range all {
			if !ready(t, c.nodes[n]) {
				return false
			}
		}
		return true
	})
	// Gossip converges on its own schedule: poll until e1 sees everyone.
	var out string
	var code int
	waitFor(t, "e1 sees 5 alive members", 20*time.Second, func() bool {
		out, _, code = runCLI(t, c.env("e1"), "members")
		return code == 0 && strings.Count(out, "alive") == 5
	})
	if code != 0 || strings.Count(out, "alive") != 5 || !strings.Contains(out, "edge") || !strings.Contains(out, "ap") {
		t.Fatalf("members: exit %d\n%s", code, out)
	}

	// An owner, created through a voter that may not be the leader.
	key := c.createOwner("v2", "alice")

	// Create through an edge; it resolves at once on every node.
	e1 := "http://" + c.nodes["e1"].http
	r := do(t, "POST", e1+"/v1/links", key, `{"url":"https://dest.example/first"}`)
	if r.status != 201 || r.header.Get("Waymark-Index") == "" {
		t.Fatalf("create through edge: got %d %s\n%s", r.status, r.body, c.nodes["e1"].logs())
	}
	first := r.json(t)["code"].(string)
	for _, n := range all {
		if !resolves(t, c.nodes[n], first, "https://dest.example/first") {
			t.Errorf("fresh link %s does not resolve on %s right after the create", first, n)
		}
	}

	// Takedown through the other edge reaches every node.
	t0 := time.Now()
	if r := do(t, "DELETE", "http://"+c.nodes["e2"].http+"/v1/links/"+first, key, ""); r.status != 204 {
		t.Fatalf("delete through e2: got %d %s", r.status, r.body)
	}
	waitFor(t, "takedown on every node", 10*time.Second, func() bool {
		for _, n := range all {
			if do(t, "GET", "http://"+c.nodes[n].http+"/"+first, "", "").status != 410 {
				return false
			}
		}
		return true
	})
	t.Logf("takedown reached all %d nodes in %v", len(all), time.Since(t0).Round(time.Millisecond))

	// SIGKILL the leader in the middle of a stream of creates from an edge.
	leader := c.leader("v1")
	if leader == "" {
		t.Fatal("no leader")
	}
	var mu sync.Mutex
	acked := map[string]string{}
	var failures int
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				dest := fmt.Sprintf("https://stream.example/%d/%d", w, i)
				r := do(t, "POST", e1+"/v1/links", key, fmt.Sprintf(`{"url":%q}`, dest), "Idempotency-Key", fmt.Sprintf("s-%d-%d", w, i))
				mu.Lock()
				if r.status == 201 {
					acked[r.json(t)["code"].(string)] = dest
				} else {
					failures++
					time.Sleep(10 * time.Millisecond) // back off while there is no leader
					if r.status == 503 && r.header.Get("Retry-After") == "" {
						t.Errorf("503 without Retry-After")
					}
				}
				mu.Unlock()
			}
		}(w)
	}
	waitFor(t, "creates flowing", 20*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) >= 50 })
	c.nodes[leader].kill()
	killed := leader
	before := len(acked)
	waitFor(t, "creates resume under a new leader", 60*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) >= before+50 })
	close(stop)
	wg.Wait()
	t.Logf("leader %s killed: %d creates acknowledged, %d refused during the election", killed, len(acked), failures)
	live := []string{}
	for _, n := range all {
		if n != killed {
			live = append(live, n)
		}
	}
	codes := map[string]bool{}
	for code := range acked {
		if codes[code] {
			t.Fatalf("code %s acknowledged twice", code)
		}
		codes[code] = true
	}
	waitFor(t, "every acknowledged create on every live node", 60*time.Second, func() bool {
		for _, n := range live {
			for code, dest := range acked {
				if !resolves(t, c.nodes[n], code, dest) {
					return false
				}
			}
		}
		return true
	})

	// The killed node comes back and catches up.
	c.restart(killed)
	waitFor(t, "restarted node catches up", 60*time.Second, func() bool {
		for code, dest := range acked {
			if !resolves(t, c.nodes[killed], code, dest) {
				return false
			}
		}
		return true
	})

	// Pause an edge while links change; it catches up after SIGCONT.
	e2 := c.nodes["e2"]
	syscall.Kill(e2.cmd.Process.Pid, syscall.SIGSTOP)
	var changed []string
	for i := 0; i < 20; i++ {
		r := createRetrying(t, e1+"/v1/links", key, fmt.Sprintf(`{"url":"https://paused.example/%d"}`, i), fmt.Sprintf("paused-%d", i))
		if r.status != 201 {
			t.Fatalf("create while e2 paused: got %d %s", r.status, r.body)
		}
		changed = append(changed, r.json(t)["code"].(string))
	}
	syscall.Kill(e2.cmd.Process.Pid, syscall.SIGCONT)
	waitFor(t, "paused edge catches up", 30*time.Second, func() bool {
		for i, code := range changed {
			if !resolves(t, e2, code, fmt.Sprintf("https://paused.example/%d", i)) {
				return false
			}
		}
		return true
	})

	// Pause every voter: edges keep redirecting what they hold and answer
	// writes with 503 + Retry-After; after SIGCONT the cluster recovers.
	voters := []string{"v1", "v2", "v3"}
	for _, v := range voters {
		syscall.Kill(c.nodes[v].cmd.Process.Pid, syscall.SIGSTOP)
	}
	for code, dest := range acked {
		if !resolves(t, c.nodes["e1"], code, dest) || !resolves(t, e2, code, dest) {
			t.Fatalf("with every voter paused, edge does not redirect %s", code)
		}
		break
	}
	r = do(t, "POST", e1+"/v1/links", key, `{"url":"https://nope.example/"}`)
	if r.status != 503 || r.header.Get("Retry-After") == "" || !strings.HasPrefix(r.header.Get("Content-Type"), "application/problem+json") {
		t.Fatalf("write with every voter paused: got %d Retry-After %q: %s", r.status, r.header.Get("Retry-After"), r.body)
	}
	for _, v := range voters {
		syscall.Kill(c.nodes[v].cmd.Process.Pid, syscall.SIGCONT)
	}
	waitFor(t, "writes work again after the voters resume", 60*time.Second, func() bool {
		return do(t, "POST", e1+"/v1/links", key, `{"url":"https://back.example/"}`).status == 201
	})

	// remove-peer: a dead edge is removed by the operator.
	c.nodes["e2"].kill()
	// The voters have just resumed: an election may still be settling, and
	// the CLI answers 503 then, as a client would see; retry as one would.
	waitFor(t, "raft remove-peer e2 succeeds", 30*time.Second, func() bool {
		_, _, code = runCLI(t, c.env("v1"), "raft", "remove-peer", "e2")
		return code == 0
	})
	waitFor(t, "e2 gone from raft", 10*time.Second, func() bool {
		for _, p := range c.peers("v1") {
			if p.ID == "e2" {
				return false
			}
		}
		return true
	})
	if _, errOut, code := runCLI(t, c.env("v1"), "raft", "remove-peer", "nobody"); code != 1 || !strings.Contains(errOut, "unknown peer") {
		t.Fatalf("remove-peer of an unknown id: exit %d %q; want 1 and 'unknown peer'", code, errOut)
	}

	// transfer-leader hands leadership to a named voter.
	target := "v1"
	if c.leader("v1") == "v1" {
		target = "v2"
	}
	if out, errOut, code := runCLI(t, c.env("v3"), "raft", "transfer-leader", target); code != 0 {
		t.Fatalf("transfer-leader %s: exit %d %s %s", target, code, out, errOut)
	}
	waitFor(t, "leadership on "+target, 20*time.Second, func() bool { return c.leader("v1") == target })

	// Graceful leave of e1: it leaves raft and gossip, then exits.
	if out, errOut, code := runCLI(t, c.env("e1"), "leave"); code != 0 {
		for _, v := range []string{"v1", "v2", "v3"} {
			for _, line := range strings.Split(c.nodes[v].logs(), "\n") {
				if strings.Contains(line, "membership") || strings.Contains(line, "e1") {
					t.Log(v, line)
				}
			}
		}
		t.Fatalf("leave: exit %d %s %s", code, out, errOut)
	}
	select {
	case <-c.nodes["e1"].done:
	case <-time.After(30 * time.Second):
		t.Fatal("e1 did not exit after leave")
	}
	waitFor(t, "e1 gone from raft", 20*time.Second, func() bool {
		for _, p := range c.peers("v1") {
			if p.ID == "e1" {
				return false
			}
		}
		return true
	})
	var lastMembers string
	defer func() {
		if t.Failed() {
			t.Logf("last members answer on v1: %s", lastMembers)
			for _, line := range strings.Split(c.nodes["v1"].logs(), "\n") {
				if strings.Contains(line, "memberlist") || strings.Contains(line, "e1") {
					t.Log("v1", line)
				}
			}
		}
	}()
	waitFor(t, "e1 shown as left", 20*time.Second, func() bool {
		out, errOut, _ := runCLI(t, c.env("v1"), "members", "-format", "json")
		lastMembers = out + errOut
		var ms []struct{ Name, Status string }
		json.Unmarshal([]byte(out), &ms)
		for _, m := range ms {
			if m.Name == "e1" {
				return m.Status == "left"
			}
		}
		return false
	})

	// Status of a node describes it.
	out, _, code = runCLI(t, c.env("v3"), "status", "-format", "json")
	if code != 0 || !strings.Contains(out, `"region": "ap"`) || !strings.Contains(out, `"leader": "`+target+`"`) {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
}
