package edge

// This test wires the site API to the real raft package: it is the one
// place edge is tested against raft rather than the in-package testWriter,
// so the whole path (HTTP, command encoding, forwarding, the FSM, the
// replica the other node reads) runs as in a node. Only the test imports
// raft; edge itself does not.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/raft"
	"github.com/waymark/waymark/store"
)

// raftEnv is one raft node (with its own store) and an edge server on it.
type raftEnv struct {
	*env
	node *raft.Node
}

func startRaftEnv(t *testing.T, id string, bootstrap bool, forward func(ctx context.Context, leaderID, addr string, cmd []byte) ([]byte, error)) *raftEnv {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "store"), store.Options{Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	n, err := raft.Open(raft.Config{
		NodeID: id, Region: "r-" + id, Dir: filepath.Join(dir, "raft"), BindAddr: "127.0.0.1:0",
		Bootstrap: bootstrap, Forward: forward, Logger: discardLogger(),
		HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond,
	}, st)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("close raft %s: %v", id, err)
		}
		st.Close()
	})
	e := &env{t: t, st: st}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = ln.Addr().String()
	e.cfg = Config{PublicURL: "http://" + e.addr, WriteRate: -1, Logger: discardLogger()}
	if e.srv, err = New(e.cfg, st, n); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := e.srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		<-done
	})
	e.client = &fasthttp.HostClient{Addr: e.addr, ReadTimeout: 10 * time.Second}
	return &raftEnv{env: e, node: n}
}

// poll waits for cond with a deadline.
func poll(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %s", what, detail)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSiteAPIOverRaft(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leader := startRaftEnv(t, "v1", true, nil)
	if err := leader.node.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	edgeNode := startRaftEnv(t, "e1", false, func(ctx context.Context, _, _ string, cmd []byte) ([]byte, error) {
		return leader.node.ApplyForwarded(ctx, cmd)
	})
	if err := leader.node.AddNonvoter("e1", edgeNode.node.Addr()); err != nil {
		t.Fatal(err)
	}
	if err := edgeNode.node.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	for _, o := range []struct{ id, key string }{{"alice", keyAlice}, {"bob", keyBob}} {
		if _, err := leader.node.CreateOwner(ctx, &store.Owner{ID: o.id, Name: o.id}, store.HashAPIKey([]byte(o.key))); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, "the owners on e1", func() (bool, string) {
		_, found, err := edgeNode.st.OwnerByKey(store.HashAPIKey([]byte(keyBob)))
		return found && err == nil, fmt.Sprint(err)
	})

	// The site is registered through the edge (forwarded) and read back
	// on the leader.
	site := edgeNode.createSite(keyAlice, "a.example")
	sitePath := "/v1/sites/" + site.ID
	poll(t, "the site on v1", func() (bool, string) {
		r := leader.do("GET", sitePath, keyAlice, "")
		return r.status == 200, string(r.body)
	})

	// A goal created through e1 is visible on v1.
	r := edgeNode.do("POST", sitePath+"/goals", keyAlice, `{"page_path":"/pricing"}`)
	edgeNode.expect(r, 201, "")
	g := decodeInto[goalView](t, r)
	poll(t, "the goal on v1", func() (bool, string) {
		r := leader.do("GET", sitePath+"/goals/"+g.ID, keyAlice, "")
		return r.status == 200 && strings.Contains(string(r.body), `"page_path":"/pricing"`), string(r.body)
	})

	// A PATCH of honor_dnt on v1 replicates to e1.
	leader.expect(leader.do("PATCH", sitePath, keyAlice, `{"honor_dnt":false}`), 200, "")
	poll(t, "honor_dnt false on e1", func() (bool, string) {
		v := decodeInto[siteView](t, edgeNode.do("GET", sitePath, keyAlice, ""))
		return !v.HonorDNT, fmt.Sprintf("%+v", v)
	})
	if st, _, _ := edgeNode.st.Site(site.ID); !st.IgnoreDNT || len(st.Goals) != 1 {
		t.Errorf("e1's replica: %+v; want IgnoreDNT and one goal", st)
	}

	// Invalid input gets its problem and changes nothing on either node,
	// whichever node it is sent to; another owner gets 404.
	index := func(n *raftEnv) uint64 {
		i, err := n.st.AppliedIndex()
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	poll(t, "e1 to catch up", func() (bool, string) { return index(edgeNode) == index(leader), "" })
	records := func() [][]byte {
		var out [][]byte
		for _, n := range []*raftEnv{leader, edgeNode} {
			st, _, err := n.st.Site(site.ID)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, store.AppendSite(nil, &st))
		}
		return out
	}
	before, beforeIndex := records(), index(leader)
	for _, n := range []*raftEnv{edgeNode, leader} {
		for _, tc := range []struct {
			method, path, key, body string
			status                  int
			problem                 string
		}{
			{"PATCH", sitePath, keyAlice, `{"honor_dnt":"no"}`, 400, probInvalidRequest},
			{"PATCH", sitePath, keyAlice, `{"timezone":"Nowhere/Land"}`, 400, probInvalidRequest},
			{"POST", sitePath + "/goals", keyAlice, `{"event_name":"engagement"}`, 400, probInvalidRequest},
			{"POST", sitePath + "/goals", keyAlice, `{"event_name":"a","page_path":"/a"}`, 400, probInvalidRequest},
			{"POST", sitePath + "/goals", keyAlice, `{"page_path":"pricing"}`, 409, probGoalExists},
			{"PATCH", sitePath, keyBob, `{"honor_dnt":true}`, 404, probNotFound},
			{"POST", sitePath + "/goals", keyBob, `{"event_name":"Mine"}`, 404, probNotFound},
			{"DELETE", sitePath + "/goals/" + g.ID, keyBob, "", 404, probNotFound},
			{"DELETE", sitePath + "/goals/nothere", keyAlice, "", 404, probNotFound},
		} {
			r := n.do(tc.method, tc.path, tc.key, tc.body)
			if r.status != tc.status || r.problem(t).Type != "/problems/"+tc.problem {
				t.Errorf("%s %s %s: got %d %s; want %d %s", tc.method, tc.path, tc.body, r.status, r.body, tc.status, tc.problem)
			}
		}
	}
	// Refusals that reached the FSM (the owner checks, the unknown goal)
	// took log entries but wrote nothing; give e1 time to apply them.
	poll(t, "e1 to apply the refused entries", func() (bool, string) { return index(edgeNode) == index(leader), "" })
	if after := records(); !bytes.Equal(after[0], before[0]) || !bytes.Equal(after[1], before[1]) {
		t.Errorf("refused requests changed the site")
	}
	if index(leader) == beforeIndex {
		t.Error("no refusal reached the log; the owner checks of PATCH and DELETE are the FSM's, so they must")
	}
	for _, n := range []*raftEnv{leader, edgeNode} {
		if ok, detail := n.node.Ready(); !ok {
			t.Errorf("not ready after refusals: %s", detail)
		}
	}

	// A DELETE through e1 replicates to v1.
	edgeNode.expect(edgeNode.do("DELETE", sitePath+"/goals/"+g.ID, keyAlice, ""), 204, "")
	poll(t, "the goal gone from v1", func() (bool, string) {
		var v struct{ Goals []json.RawMessage }
		r := leader.do("GET", sitePath+"/goals", keyAlice, "")
		if err := json.Unmarshal(r.body, &v); err != nil {
			return false, err.Error()
		}
		return len(v.Goals) == 0, string(r.body)
	})
}
