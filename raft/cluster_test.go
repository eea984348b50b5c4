package raft

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waymark/waymark/store"
)

// TestCluster runs one cluster of three voters and two non-voter edges
// through forwarding, a leader crash under load, catch-up and membership
// changes. The steps share the cluster to keep the package's test time
// down, so each depends on the ones before it.
func TestCluster(t *testing.T) {
	c := newCluster(t, func(cfg *Config) { cfg.BlockSize = 64 })
	v1, v2, v3 := c.add("v1", "us"), c.add("v2", "eu"), c.add("v3", "ap")
	leader := c.bootstrap(v1, v2, v3)
	if got := leader.leader.get(); !slices.Equal(got, []bool{true}) {
		t.Errorf("OnLeader on %s: got %v; want [true]", leader.id, got)
	}

	e1, e2 := c.add("e1", "eu"), c.add("e2", "ap")
	if ok, detail := e1.node().Ready(); ok || !bytes.Contains([]byte(detail), []byte("waiting to be added")) {
		t.Errorf("e1 before it is added: got ready %v %q; want waiting to be added", ok, detail)
	}
	if err := e1.node().AddNonvoter("e2", e2.node().Addr()); !errors.Is(err, store.ErrNoLeader) {
		t.Errorf("AddNonvoter on an edge: got %v; want ErrNoLeader", err)
	}
	for _, e := range []*member{e1, e2} {
		c.onLeader("add "+e.id, func(n *Node) error { return n.AddNonvoter(e.id, e.node().Addr()) })
	}
	c.leader()
	want := map[string]bool{"v1": true, "v2": true, "v3": true, "e1": false, "e2": false}
	for _, m := range c.live() {
		waitFor(t, m.id+" to learn the configuration", func() (bool, string) {
			got := servers(t, m.node())
			return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprint(got)
		})
		if s := m.node().Stats(); s.Servers != 5 || s.Voter != want[m.id] {
			t.Errorf("%s stats: got servers %d voter %v; want 5, %v", m.id, s.Servers, s.Voter, want[m.id])
		}
	}

	t.Run("staleness gauge", func(t *testing.T) {
		for _, m := range c.live() {
			n := m.node()
			n.m.observe(n.raft, n.lastContactOrStart())
			got := n.m.lastContact.Get()
			if n.IsLeader() && got != 0 {
				t.Errorf("%s (leader) last contact: got %.3fs; want 0", m.id, got)
			}
			if !n.IsLeader() && (n.LastContact().IsZero() || got > 5) {
				t.Errorf("%s last contact: got %v, gauge %.3fs; want a recent contact", m.id, n.LastContact(), got)
			}
		}
	})

	t.Run("create through an edge reaches every store", func(t *testing.T) {
		code := createThrough(t, e1, "https://example.com/from-e1")
		c.waitLinks(code)
		checkRegion(t, e1, code, "eu")
		if got := e1.node().m.forwards.ok.Get(); got == 0 {
			t.Errorf("e1 forwards: got %d; want some", got)
		}
	})

	t.Run("errors keep their identity through forwarding", func(t *testing.T) {
		ctx := testCtx(t)
		ln := c.leader().node()
		if _, _, err := ln.CreateLink(ctx, &store.Link{Code: "taken01", URL: "https://a", Owner: "o1"}, nil); err != nil {
			t.Fatalf("create alias on the leader: %v", err)
		}
		if _, err := ln.CreateSite(ctx, &store.Site{ID: "s1", Domain: "example.com"}); err != nil {
			t.Fatalf("create site: %v", err)
		}
		if _, _, err := ln.CreateLink(ctx, &store.Link{Code: "perm001", URL: "https://p", Owner: "o1", Redirect: 301}, nil); err != nil {
			t.Fatalf("create permanent link: %v", err)
		}
		c.waitLinks("taken01", "perm001")
		en := e2.node()
		if _, _, err := en.CreateLink(ctx, &store.Link{Code: "taken01", URL: "https://b", Owner: "o2"}, nil); !errors.Is(err, store.ErrCodeTaken) {
			t.Errorf("alias taken elsewhere: got %v; want ErrCodeTaken", err)
		}
		if _, err := en.UpdateLink(ctx, &store.LinkPatch{Code: "taken01", Owner: "o2", SetURL: true, URL: "https://c"}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("edit of another owner's link: got %v; want ErrNotFound", err)
		}
		if _, err := en.UpdateLink(ctx, &store.LinkPatch{Code: "perm001", Owner: "o1", SetURL: true, URL: "https://q"}); !errors.Is(err, store.ErrPermanentRedirect) {
			t.Errorf("new URL for a 301: got %v; want ErrPermanentRedirect", err)
		}
		if _, err := en.CreateSite(ctx, &store.Site{ID: "s2", Domain: "example.com"}); !errors.Is(err, store.ErrDomainTaken) {
			t.Errorf("second site for a domain: got %v; want ErrDomainTaken", err)
		}
		up, err := en.UpdateLink(ctx, &store.LinkPatch{Code: "taken01", Owner: "o1", SetStatus: true, Status: store.StatusDisabled})
		if err != nil || up.Status != store.StatusDisabled || up.Index == 0 {
			t.Errorf("edit through an edge: got %+v, %v; want the disabled link with its index", up, err)
		}
		idem := &store.IdempotencyWrite{Owner: "o1", Key: "k1", Record: store.Idempotency{Status: 201, Response: []byte("idem001"), CreatedAt: time.Now().UnixMilli()}}
		if _, existing, err := en.CreateLink(ctx, &store.Link{Code: "idem001", URL: "https://i", Owner: "o1"}, idem); err != nil || existing != nil {
			t.Fatalf("idempotent create through an edge: got %v, %+v", err, existing)
		}
		_, existing, err := e1.node().CreateLink(ctx, &store.Link{Code: "idem002", URL: "https://i", Owner: "o1"}, idem)
		if err != nil || existing == nil || string(existing.Response) != "idem001" {
			t.Errorf("retry through the other edge: got %+v, %v; want the first answer", existing, err)
		}
	})

	t.Run("an edge that was away catches up from the log", func(t *testing.T) {
		e2.stop()
		codes := make([]string, 20)
		for i := range codes {
			codes[i] = createThrough(t, e1, fmt.Sprintf("https://example.com/while-away/%d", i))
		}
		if _, err := e1.node().UpdateLink(testCtx(t), &store.LinkPatch{Code: codes[0], SetStatus: true, Status: store.StatusBlocked}); err != nil {
			t.Fatalf("takedown while e2 is away: %v", err)
		}
		// An owner's edit of the blocked link is refused on the leader and
		// the refusal arrives intact; no replica stops applying.
		if _, err := e1.node().UpdateLink(testCtx(t), &store.LinkPatch{Code: codes[0], Owner: "o1", SetStatus: true, Status: store.StatusActive}); !errors.Is(err, store.ErrLinkLocked) {
			t.Errorf("owner edit of a blocked link: got %v; want ErrLinkLocked", err)
		}
		e2.start()
		c.waitLinks(codes...)
		c.waitCaughtUp()
		if got := mustGetLink(t, e2.store(), codes[0]); got.Status != store.StatusBlocked {
			t.Errorf("takedown on e2: got status %v; want blocked", got.Status)
		}
		if got := e2.ev.restoreCount(); got != 0 {
			t.Errorf("snapshot restores on e2: got %d; want 0 (caught up from the log)", got)
		}
	})

	var oldLeader *member
	var acked map[int]string
	t.Run("leader crash in the middle of a stream of creates", func(t *testing.T) {
		oldLeader = c.leader()
		acked = streamThroughCrash(t, c, e1, oldLeader)
		newLeader := c.leader()
		if newLeader == oldLeader {
			t.Fatalf("leader after the crash: got %s again", newLeader.id)
		}
		if got := oldLeader.leader.get(); len(got) == 0 || got[len(got)-1] {
			t.Errorf("OnLeader on the crashed leader: got %v; want it to end with false", got)
		}
		if got := newLeader.leader.get(); len(got) == 0 || !got[len(got)-1] {
			t.Errorf("OnLeader on the new leader: got %v; want it to end with true", got)
		}
		checkExactlyOnce(t, c, acked)
	})

	t.Run("the crashed leader restarts and catches up", func(t *testing.T) {
		oldLeader.start()
		codes := make([]string, 0, len(acked))
		for _, code := range acked {
			codes = append(codes, code)
		}
		c.waitLinks(codes...)
		c.waitCaughtUp()
		checkExactlyOnce(t, c, acked)
	})

	t.Run("transfer leadership", func(t *testing.T) {
		from := c.leader()
		c.onLeader("transfer to any voter", func(n *Node) error { return n.TransferLeadership("") })
		to := c.leader()
		if to == from {
			t.Fatalf("leader after transfer: got %s; want another voter", to.id)
		}
		if got := from.leader.get(); got[len(got)-1] {
			t.Errorf("OnLeader on the former leader: got %v; want it to end with false", got)
		}
		var target *member
		for _, v := range []*member{v1, v2, v3} {
			if v != to {
				target = v
				break
			}
		}
		c.onLeader("transfer to "+target.id, func(n *Node) error { return n.TransferLeadership(target.id) })
		if got := c.leader(); got != target {
			t.Errorf("leader after a targeted transfer: got %s; want %s", got.id, target.id)
		}
		if err := c.leader().node().TransferLeadership("e1"); err == nil {
			t.Errorf("transfer to a non-voter: got nil error; want one")
		}
	})

	t.Run("remove a server", func(t *testing.T) {
		c.onLeader("remove e2", func(n *Node) error { return n.RemoveServer("e2") })
		for _, m := range c.live() {
			if m.id == "e2" {
				// A removed server hears of its removal only if the
				// configuration entry reaches it before the leader stops
				// replicating to it; Raft does not promise that.
				continue
			}
			waitFor(t, m.id+" to drop e2", func() (bool, string) {
				got := servers(t, m.node())
				_, has := got["e2"]
				return !has && len(got) == 4, fmt.Sprint(got)
			})
		}
		if err := c.leader().node().RemoveServer("e2"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("remove e2 again: got %v; want ErrNotFound", err)
		}
		// The cluster still takes writes through the remaining edge.
		createThrough(t, e1, "https://example.com/after-remove")
	})
}

// checkRegion asserts that a generated code came from region's ID range.
func checkRegion(t *testing.T, m *member, code, region string) {
	t.Helper()
	perm, err := m.node().Permuter()
	if err != nil {
		t.Fatalf("permuter: %v", err)
	}
	id, err := perm.IDOf([]byte(code))
	if err != nil {
		t.Fatalf("IDOf(%q): %v", code, err)
	}
	slot, found, err := m.store().RegionSlot(region)
	if err != nil || !found {
		t.Fatalf("region slot %s: found %v, %v", region, found, err)
	}
	if got := store.RegionOf(id); got != slot {
		t.Errorf("code %s from %s: got region slot %d; want %d (%s)", code, m.id, got, slot, region)
	}
}

// streamThroughCrash creates links through edge from two callers, crashes
// leader part-way, and keeps going until a quota of creates after the
// crash succeeded. Each logical create i retries with the same
// Idempotency-Key (and a new code, as an HTTP retry would get) until it is
// acknowledged; it returns the acknowledged code of every i.
func streamThroughCrash(t *testing.T, c *cluster, edge, leader *member) map[int]string {
	t.Helper()
	const before, total, workers = 40, 120, 2
	var (
		mu      sync.Mutex
		acked   = map[int]string{}
		next    atomic.Int32
		crashed = make(chan struct{})
		failed  atomic.Bool
	)
	ackedCount := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				i := int(next.Add(1)) - 1
				if i >= total {
					return
				}
				if i >= before {
					<-crashed // keep part of the stream for after the crash
				}
				code, err := createWithRetry(edge.node(), i)
				if err != nil {
					t.Errorf("create %d: %v", i, err)
					failed.Store(true)
					return
				}
				mu.Lock()
				acked[i] = code
				mu.Unlock()
			}
		}()
	}
	waitFor(t, "creates before the crash", func() (bool, string) {
		return ackedCount() >= before/2 || failed.Load(), fmt.Sprintf("%d acknowledged", ackedCount())
	})
	leader.stop() // mid-stream: the workers still have creates in flight
	close(crashed)
	wg.Wait()
	if failed.Load() {
		t.FailNow()
	}
	if got := ackedCount(); got != total {
		t.Fatalf("acknowledged creates: got %d; want %d", got, total)
	}
	f := &edge.node().m.forwards
	t.Logf("forwards through %s: %d ok, %d no leader, %d unknown outcome, %d refused", edge.id, f.ok.Get(), f.noLeader.Get(), f.unknown.Get(), f.rejected.Get())
	return acked
}

// createWithRetry is a client that retries a create with its
// Idempotency-Key while the outcome is unknown or there is no leader.
func createWithRetry(n *Node, i int) (string, error) {
	url := fmt.Sprintf("https://example.com/stream/%d", i)
	idem := &store.IdempotencyWrite{Owner: "stream", Key: fmt.Sprintf("stream-%d", i), Record: store.Idempotency{
		RequestHash: sha256.Sum256([]byte(url)), Status: 201, CreatedAt: time.Now().UnixMilli(),
	}}
	deadline := time.Now().Add(20 * time.Second)
	backoff := time.NewTicker(20 * time.Millisecond)
	defer backoff.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		code, err := n.NewCode(ctx)
		if err == nil {
			idem.Record.Response = []byte(code)
			var existing *store.Idempotency
			_, existing, err = n.CreateLink(ctx, &store.Link{Code: code, URL: url, Owner: "stream", CreatedAt: 1}, idem)
			if err == nil && existing != nil {
				code = string(existing.Response)
			}
		}
		cancel()
		switch {
		case err == nil:
			return code, nil
		case !errors.Is(err, store.ErrNoLeader) && !errors.Is(err, store.ErrUnknownOutcome):
			return "", err
		case time.Now().After(deadline):
			return "", fmt.Errorf("still failing after 20s: %w", err)
		}
		<-backoff.C
	}
}

// checkExactlyOnce asserts that every live store holds each acknowledged
// create under its acknowledged code, and no create twice.
func checkExactlyOnce(t *testing.T, c *cluster, acked map[int]string) {
	t.Helper()
	codes := make([]string, 0, len(acked))
	for _, code := range acked {
		codes = append(codes, code)
	}
	c.waitLinks(codes...)
	for _, m := range c.live() {
		byURL := map[string][]string{}
		cursor := ""
		for {
			links, next, err := m.store().ListLinks("stream", cursor, 100)
			if err != nil {
				t.Fatalf("list links on %s: %v", m.id, err)
			}
			for _, l := range links {
				byURL[l.URL] = append(byURL[l.URL], l.Code)
			}
			if next == "" {
				break
			}
			cursor = next
		}
		for url, codes := range byURL {
			if len(codes) != 1 {
				t.Errorf("%s: %s stored %d times (%v); want once", m.id, url, len(codes), codes)
			}
		}
		for i, code := range acked {
			url := fmt.Sprintf("https://example.com/stream/%d", i)
			if got := byURL[url]; len(got) != 1 || got[0] != code {
				t.Errorf("%s: create %d: got codes %v; want [%s]", m.id, i, got, code)
			}
		}
	}
}

// TestClusterEdgeCatchesUpBySnapshot keeps so little log that an edge
// that was away must install a snapshot.
func TestClusterEdgeCatchesUpBySnapshot(t *testing.T) {
	c := newCluster(t, func(cfg *Config) {
		cfg.TrailingLogs = 2
		cfg.SnapshotThreshold = 8
	})
	v1 := c.add("v1", "us")
	c.bootstrap(v1)
	e1 := c.add("e1", "eu")
	c.onLeader("add e1", func(n *Node) error { return n.AddNonvoter("e1", e1.node().Addr()) })
	c.onLeader("claim eu", func(n *Node) error { _, _, err := n.ClaimRegion(testCtx(t), "eu"); return err })
	c.waitCaughtUp() // e1 generates codes once its replica has the claim
	first := createThrough(t, e1, "https://example.com/first")
	c.waitLinks(first)

	e1.stop()
	codes := make([]string, 30)
	for i := range codes {
		codes[i] = createThrough(t, v1, fmt.Sprintf("https://example.com/snap/%d", i))
	}
	if err := v1.node().Raft().Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	last := createThrough(t, v1, "https://example.com/after-snapshot")
	e1.start()
	c.waitLinks(append(codes, last)...)
	c.waitCaughtUp()
	if got := e1.ev.restoreCount(); got == 0 {
		t.Errorf("OnRestore on e1: got %d calls; want at least 1 (installed a snapshot)", got)
	}
	if !bytes.Equal(dump(t, e1.store()), dump(t, v1.store())) {
		t.Errorf("e1's store differs from the leader's after the snapshot install")
	}
	// Writes through the edge still work after the restore replaced its store.
	code := createThrough(t, e1, "https://example.com/after-restore")
	c.waitLinks(code)
}
