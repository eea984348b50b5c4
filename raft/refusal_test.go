package raft

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/waymark/waymark/store"
)

// Commands with a field the store cannot hold (an owner id with the 0x00
// separator) are refused the same way on every replica and never halt
// one: each goes through the real cluster, by the leader's own write path,
// by a follower's forwarding path and straight into the log, and every
// node keeps applying the entries after it, also after a restart replays
// them all.
func TestRefusedCommandsNeverHaltReplicas(t *testing.T) {
	c := newCluster(t, nil)
	v1, v2, v3 := c.add("v1", "us"), c.add("v2", "us"), c.add("v3", "eu")
	c.bootstrap(v1, v2, v3)
	codes := []string{createThrough(t, v1, "https://example.com/first")}

	bad := "own\x00er"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var leader *Node
	c.onLeader("find the leader", func(n *Node) error { leader = n; return nil })
	var follower *Node
	for _, m := range c.live() {
		if n := m.node(); n != leader {
			follower = n
		}
	}
	link := func(code, owner string) *store.Link {
		return &store.Link{Code: code, URL: "https://example.com/" + code, Owner: owner, CreatedAt: 1700000000000}
	}
	// Through the API-facing calls of the leader and of a follower.
	for _, via := range []*Node{leader, follower} {
		for what, try := range map[string]func() error{
			"create_link with a NUL owner": func() error { _, _, err := via.CreateLink(ctx, link("nulown1", bad), nil); return err },
			"create_link with a NUL idempotency owner": func() error {
				_, _, err := via.CreateLink(ctx, link("nulown2", "o1"), &store.IdempotencyWrite{Owner: bad, Key: "k", Record: store.Idempotency{Status: 201, CreatedAt: 1}})
				return err
			},
			"update_link with a NUL owner": func() error {
				_, err := via.UpdateLink(ctx, &store.LinkPatch{Code: codes[0], Owner: bad, SetURL: true, URL: "https://example.com/x"})
				return err
			},
			"create_owner with a NUL id": func() error {
				_, err := via.CreateOwner(ctx, &store.Owner{ID: bad}, store.HashAPIKey([]byte("k")))
				return err
			},
			"create_site with a NUL owner": func() error {
				_, err := via.CreateSite(ctx, &store.Site{ID: "snul", Domain: "nul.example", Timezone: "UTC", Owner: bad})
				return err
			},
		} {
			err := try()
			if err == nil || errors.Is(err, store.ErrUnknownOutcome) || errors.Is(err, store.ErrNoLeader) {
				t.Fatalf("%s via %s: %v; want a refusal", what, via.cfg.NodeID, err)
			}
		}
	}
	// Straight into the log, past every check a writer makes.
	for what, cmd := range map[string][]byte{
		"create_link": appendCreateLink(nil, link("nulown3", bad), nil),
		"update_link": appendUpdateLink(nil, &store.LinkPatch{Code: codes[0], Owner: bad, SetStatus: true, Status: store.StatusActive}),
	} {
		res, err := leader.applyLocal(ctx, cmd)
		if err == nil || errors.Is(err, store.ErrUnknownOutcome) {
			t.Fatalf("raw %s with a NUL owner: %v; want a refusal", what, err)
		}
		if res == nil || res.Index == 0 {
			t.Fatalf("raw %s: no log entry (result %+v)", what, res)
		}
	}

	// Every replica goes on applying, and is ready.
	codes = append(codes, createThrough(t, v2, "https://example.com/after"))
	c.waitLinks(codes...)
	c.leader()
	for _, m := range c.live() {
		if err := m.node().fsm.haltErr(); err != nil {
			t.Fatalf("%s halted: %v", m.id, err)
		}
		var l store.Link
		if found, _ := m.store().GetLink([]byte("nulown1"), &l); found {
			t.Fatalf("%s stored a link with a NUL owner", m.id)
		}
	}
	// A restart replays the refused entries (the store is at the last
	// applied entry, so make every node replay from the log's start).
	for _, m := range c.live() {
		m.stop()
		m.start()
	}
	c.leader()
	codes = append(codes, createThrough(t, v3, "https://example.com/after-restart"))
	c.waitLinks(codes...)
	for _, m := range c.live() {
		if err := m.node().fsm.haltErr(); err != nil {
			t.Fatalf("%s halted after restart: %v", m.id, err)
		}
	}
}

// The FSM tells a command refused by the store from the store failing by
// where the error comes from, not by a list of known refusals: a check
// the list never heard of (here the store's owner-id check, reached by a
// command built in code, past the decoder) must not halt.
func TestStoreRefusalsAreNotStorageFailures(t *testing.T) {
	tn := newTestNode(t, nil)
	b := tn.st.NewBatch()
	defer b.Close()
	a := newApplier(tn.st, b)
	res := &applyResult{}
	(&createLinkCmd{Link: *testLink("nulown")}).apply(a, 1000, res)
	if res.Err != nil || a.failed != nil {
		t.Fatalf("good create: res %v, failed %v", res.Err, a.failed)
	}
	l := testLink("nulown2")
	l.Owner = "a\x00b"
	(&createLinkCmd{Link: *l}).apply(a, 1001, res)
	if res.Err == nil {
		t.Fatalf("create with a NUL owner was not refused")
	}
	if a.failed != nil {
		t.Fatalf("a refused command counts as a store failure: %v", a.failed)
	}
	if isStorageError(fmt.Errorf("cannot create link: %w", errors.New("some new check"))) {
		t.Fatalf("an unmarked error counts as a store failure")
	}
}
