package node

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/waymark/waymark/store"
)

// A leader's 400 (the command was refused before its log) and 401 (the
// cluster keys differ) reach a forwarding edge as what they are, never as
// "unknown outcome": both certainly had no effect. Real voter and edge,
// real HTTP between them.
func TestForwardKeepsLeaderRefusals(t *testing.T) {
	c := newTestCluster(t)
	v1 := c.start("v1", "--role", "voter", "--region", "us", "--bootstrap-expect", "1")
	e1 := c.start("e1", "--role", "edge", "--region", "us", "--join", v1.gossip.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waitUntil(t, "e1 ready behind v1", 30*time.Second, func() bool {
		ok, _ := e1.ready()
		_, known := e1.httpAddrOf("v1")
		return ok && known && e1.raft.Stats().LeaderID == "v1"
	})
	_, key, err := v1.CreateOwner(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "e1 to apply the owner", 10*time.Second, func() bool {
		_, found, _ := e1.store.OwnerByKey(store.HashAPIKey([]byte(key)))
		return found
	})

	// 400: a command the leader cannot read (a newer edge, say).
	_, err = e1.forward(ctx, "v1", "", []byte{222, 1, 0})
	if !errors.Is(err, store.ErrRefused) || errors.Is(err, store.ErrUnknownOutcome) {
		t.Errorf("leader's 400: got %v; want ErrRefused and not an unknown outcome", err)
	}

	// 401: the edge presents a token from another cluster key.
	e1.peers = newPeerClient(internalToken([]byte("another cluster key, 32 bytes!!!")), e1.peerTLS.clientConfig())
	_, err = e1.forward(ctx, "v1", "", []byte{222, 1, 0})
	if !errors.Is(err, store.ErrClusterKeyMismatch) || errors.Is(err, store.ErrUnknownOutcome) {
		t.Errorf("leader's 401: got %v; want ErrClusterKeyMismatch and not an unknown outcome", err)
	}
	// Through the public API, a create says it was not made.
	req, _ := http.NewRequest("POST", "http://"+e1.HTTPAddr()+"/v1/links", strings.NewReader(`{"url":"https://dest.example/x"}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(body), "cluster keys differ") || !strings.Contains(string(body), "was not made") ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		t.Errorf("create through an edge with the wrong cluster key: got %d %s; want 503 problem saying the keys differ and it was not made", resp.StatusCode, body)
	}
}
