package raft

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waymark/waymark/store"
)

func TestDecodeKeyCommandsRejects(t *testing.T) {
	h := store.HashAPIKey([]byte("s"))
	key := func(k store.APIKey) []byte { return appendCommand(nil, &createKeyCmd{Key: k}) }
	good := store.APIKey{Owner: "o", Name: "n", Scopes: store.ScopeLinksRead, Hash: h}
	withScopes := func(s store.Scopes) store.APIKey { k := good; k.Scopes = s; return k }
	withName := func(n string) store.APIKey { k := good; k.Name = n; return k }
	goodKey := key(good)
	cases := []struct {
		name string
		data []byte
	}{
		{"key without scopes", key(withScopes(0))},
		{"key with an unknown scope", key(withScopes(1 << 6))},
		{"key without a name", key(withName(""))},
		{"key name too long", key(withName(strings.Repeat("n", store.MaxKeyNameLen+1)))},
		{"key name with a newline", key(withName("a\nb"))},
		{"key without an owner", key(store.APIKey{Name: "n", Scopes: store.ScopeLinksRead})},
		{"key owner with NUL", key(store.APIKey{Owner: "o\x00", Name: "n", Scopes: store.ScopeLinksRead})},
		{"key hash truncated", goodKey[:len(goodKey)-1]},
		{"key trailing byte", append(append([]byte(nil), goodKey...), 0)},
		{"revoke of a short id", appendRevokeKey(nil, "o", "abc")},
		{"revoke of an upper-case id", appendRevokeKey(nil, "o", "0123456789ABCDEF")},
		{"revoke owner with NUL", appendRevokeKey(nil, "o\x00", "0123456789abcdef")},
		{"touch of no keys", appendTouchKeys(nil, nil)},
		{"touch of too many keys", appendTouchKeys(nil, make([]store.KeyTouch, MaxTouchesPerEntry+1))},
		{"touch before 1970", appendTouchKeys(nil, []store.KeyTouch{{Hash: h, At: -1}})},
		{"touch truncated", appendTouchKeys(nil, []store.KeyTouch{{Hash: h, At: 5}})[:20]},
	}
	for _, tc := range cases {
		if _, _, err := decodeCommand(tc.data); !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("%s: got %v; want ErrCorrupt", tc.name, err)
		}
	}
}

// revokedSets records, per node, the key hashes the FSM reported revoked.
type revokedSets struct {
	mu   sync.Mutex
	seen map[string]map[store.KeyHash]int
}

func (r *revokedSets) hook(cfg *Config) {
	node := cfg.NodeID
	cfg.OnKeyRevoked = func(h store.KeyHash) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.seen[node] == nil {
			r.seen[node] = map[store.KeyHash]int{}
		}
		r.seen[node][h]++
	}
}

func (r *revokedSets) count(node string, h store.KeyHash) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[node][h]
}

// Keys are created, touched and revoked through a follower; every replica
// follows, and every node's FSM reports the revoked hash twice (before and
// after its commit) so a cache can drop it.
func TestKeysReplicate(t *testing.T) {
	rs := &revokedSets{seen: map[string]map[store.KeyHash]int{}}
	c := newCluster(t, rs.hook)
	v1, v2, v3 := c.add("v1", "us"), c.add("v2", "eu"), c.add("v3", "ap")
	c.bootstrap(v1, v2, v3)
	ada := store.Owner{ID: "own_ada", Name: "Ada", CreatedAt: 1}
	c.onLeader("create owner", func(n *Node) error {
		_, err := n.CreateOwner(context.Background(), &ada, store.HashAPIKey([]byte("key")))
		return err
	})
	var follower *member
	for _, m := range c.live() {
		if !m.node().IsLeader() {
			follower = m
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	retry := func(what string, op func() error) error {
		var err error
		waitFor(t, what, func() (bool, string) {
			err = op()
			return !errors.Is(err, store.ErrNoLeader), fmt.Sprint(err)
		})
		return err
	}
	h := store.HashAPIKey([]byte("wm_scoped"))
	var k store.APIKey
	err := retry("create a key", func() (err error) {
		k, err = follower.node().CreateKey(ctx, &store.APIKey{Owner: "own_ada", Name: "ci", Scopes: store.ScopeLinksRead, CreatedAt: 77, Hash: h})
		return err
	})
	if err != nil || k.ID != store.KeyID(h) || k.Scopes != store.ScopeLinksRead || k.CreatedAt != 77 {
		t.Fatalf("CreateKey = %+v, %v", k, err)
	}
	if err := retry("a duplicate key", func() error {
		_, err := follower.node().CreateKey(ctx, &store.APIKey{Owner: "own_ada", Name: "again", Scopes: store.ScopeLinksRead, Hash: h})
		return err
	}); !errors.Is(err, store.ErrKeyIDTaken) {
		t.Fatalf("duplicate key through a follower: %v; want ErrKeyIDTaken", err)
	}
	if err := retry("a key of nobody", func() error {
		_, err := follower.node().CreateKey(ctx, &store.APIKey{Owner: "nobody", Name: "x", Scopes: store.ScopeLinksRead, Hash: store.HashAPIKey([]byte("n"))})
		return err
	}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("key of an unknown owner: %v; want ErrNotFound", err)
	}
	if err := retry("touch", func() error {
		return follower.node().TouchKeys(ctx, []store.KeyTouch{{Hash: h, At: 120_000}})
	}); err != nil {
		t.Fatalf("TouchKeys: %v", err)
	}
	for _, m := range c.live() {
		waitFor(t, m.id+" to apply the touch", func() (bool, string) {
			_, got, found, err := m.store().APIKeyByHash(h)
			return found && err == nil && got.LastUsed == 120_000, fmt.Sprintf("%+v %v %v", got, found, err)
		})
	}
	if err := retry("revoke by another owner", func() error { return follower.node().RevokeKey(ctx, "own_bob", k.ID) }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoke by another owner: %v; want ErrNotFound", err)
	}
	if err := retry("revoke", func() error { return follower.node().RevokeKey(ctx, "own_ada", k.ID) }); err != nil {
		t.Fatalf("RevokeKey: %v", err)
	}
	// The revoking node has applied it when RevokeKey returns.
	if _, _, found, _ := follower.store().APIKeyByHash(h); found || rs.count(follower.id, h) != 2 {
		t.Fatalf("%s after RevokeKey: found %v, hook calls %d; want gone, 2", follower.id, found, rs.count(follower.id, h))
	}
	for _, m := range c.live() {
		waitFor(t, m.id+" to apply the revoke", func() (bool, string) {
			_, _, found, err := m.store().APIKeyByHash(h)
			return !found && err == nil && rs.count(m.id, h) == 2, fmt.Sprintf("found %v, err %v, hook calls %d", found, err, rs.count(m.id, h))
		})
	}
}
